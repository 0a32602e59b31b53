// wikitext.hpp - MediaWiki markup -> plain article text (the part of WikiExtractor NVIDIA's recipe uses).
// Pure functions, no I/O: safe to call from any thread.
#pragma once
#include <string>
#include <string_view>

namespace bertx::data {

// Decodes HTML character references: named (&amp; &nbsp; &ndash; ... a common subset), decimal (&#8212;) and
// hexadecimal (&#x2014;). Unknown or malformed references are kept as they are.
std::string decode_entities(std::string_view s);

// Article text as one line: drops HTML comments, <ref>...</ref> and <ref/> (and math, gallery, ... blocks),
// templates {{...}} (nested, with {{{params}}}), tables {| ... |}, headings, list and indented lines,
// [[File:]]/[[Category:]]/interlanguage links, bold/italic quotes, magic words and remaining HTML tags;
// keeps the text of [[target|text]] and [url text] links. Paragraphs are joined with one space; runs of
// whitespace collapse. Empty when nothing remains.
std::string clean_wikitext(std::string_view wikitext);

}  // namespace bertx::data
