// test_data_text.cpp - sentence segmentation, UTF-8 checks, wikitext cleaning and the Wikipedia dump reader
// (a small dump-format sample compressed with libbz2 in the test, multistream, plus corrupt/truncated inputs).
#include <bzlib.h>
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "bertx/error.hpp"
#include "data/text.hpp"
#include "data/wiki_dump.hpp"
#include "data/wikitext.hpp"
#include "test_util.hpp"

using namespace bertx;
using namespace bertx::data;
using bertx::test::read_text;
using bertx::test::TempDir;
using bertx::test::write_text;

namespace {

std::vector<std::string> sentences(const std::string& text) {
  std::vector<std::string> out;
  for (auto s : split_sentences(text)) out.emplace_back(s);
  return out;
}

std::string bz2(const std::string& data) {
  std::string out(data.size() + data.size() / 100 + 600, '\0');
  unsigned len = static_cast<unsigned>(out.size());
  REQUIRE(BZ2_bzBuffToBuffCompress(out.data(), &len, const_cast<char*>(data.data()), static_cast<unsigned>(data.size()),
                                   9, 0, 0) == BZ_OK);
  out.resize(len);
  return out;
}

std::string page(const std::string& title, int ns, const std::string& text, bool redirect = false) {
  return "  <page>\n    <title>" + title + "</title>\n    <ns>" + std::to_string(ns) + "</ns>\n    <id>1</id>\n" +
         (redirect ? "    <redirect title=\"Elsewhere\" />\n" : "") +
         "    <revision>\n      <id>2</id>\n      <text bytes=\"10\" xml:space=\"preserve\">" + text +
         "</text>\n    </revision>\n  </page>\n";
}

const std::string kHeader =
    "<mediawiki xmlns=\"http://www.mediawiki.org/xml/export-0.10/\" version=\"0.10\" xml:lang=\"en\">\n  <siteinfo>\n"
    "    <sitename>Wikipedia</sitename>\n  </siteinfo>\n";
const std::string kFooter = "</mediawiki>\n";

}  // namespace

TEST_CASE("sentences: plain ends and question and exclamation marks") {
  CHECK(sentences("The cat sat. The dog ran! Did it? Yes.") ==
        std::vector<std::string>{"The cat sat.", "The dog ran!", "Did it?", "Yes."});
  CHECK(sentences("  One sentence without end  ") == std::vector<std::string>{"One sentence without end"});
  CHECK(sentences("").empty());
}

TEST_CASE("sentences: abbreviations titles and initials do not end a sentence") {
  CHECK(sentences("Dr. Smith met Mr. Jones. They talked.") ==
        std::vector<std::string>{"Dr. Smith met Mr. Jones.", "They talked."});
  CHECK(sentences("Fruit, e.g. Apples and pears, i.e. Pome fruit, grow here. Next one.") ==
        std::vector<std::string>{"Fruit, e.g. Apples and pears, i.e. Pome fruit, grow here.", "Next one."});
  CHECK(sentences("J. R. R. Tolkien wrote it. George W. Bush read it.") ==
        std::vector<std::string>{"J. R. R. Tolkien wrote it.", "George W. Bush read it."});
  CHECK(sentences("See No. 5 and pp. 12 to 15. Then stop.") ==
        std::vector<std::string>{"See No. 5 and pp. 12 to 15.", "Then stop."});
  CHECK(sentences("Paris vs. London was close. Done.") ==
        std::vector<std::string>{"Paris vs. London was close.", "Done."});
}

TEST_CASE("sentences: U.S. and etc. end a sentence only before a sentence opener") {
  CHECK(sentences("He moved to the U.S. The move was hard.") ==
        std::vector<std::string>{"He moved to the U.S.", "The move was hard."});
  CHECK(sentences("The U.S. Army was there.") == std::vector<std::string>{"The U.S. Army was there."});
  CHECK(sentences("Apples, pears etc. The end.") == std::vector<std::string>{"Apples, pears etc.", "The end."});
  CHECK(sentences("Acme Inc. Headquarters is big.") == std::vector<std::string>{"Acme Inc. Headquarters is big."});
}

TEST_CASE("sentences: decimals and lower-case continuations") {
  CHECK(sentences("Pi is 3.14 roughly. It is irrational.") ==
        std::vector<std::string>{"Pi is 3.14 roughly.", "It is irrational."});
  CHECK(sentences("Visit example.com today. Or not.") ==
        std::vector<std::string>{"Visit example.com today.", "Or not."});
  CHECK(sentences("It said wow. and then left.") == std::vector<std::string>{"It said wow. and then left."});
  CHECK(sentences("Yahoo! is a company.") == std::vector<std::string>{"Yahoo! is a company."});
}

TEST_CASE("sentences: quotes and brackets after the period belong to the sentence") {
  CHECK(sentences("He said \"Stop.\" Then he left.") == std::vector<std::string>{"He said \"Stop.\"", "Then he left."});
  CHECK(sentences("(See below.) The rest follows.") == std::vector<std::string>{"(See below.)", "The rest follows."});
  CHECK(sentences("\"Go!\" she said. \"Now.\"") == std::vector<std::string>{"\"Go!\" she said.", "\"Now.\""});
  CHECK(sentences("It ended\xE2\x80\xA6 What now? \xE2\x80\x9CNothing.\xE2\x80\x9D Fine.") ==
        std::vector<std::string>{"It ended\xE2\x80\xA6", "What now?", "\xE2\x80\x9CNothing.\xE2\x80\x9D", "Fine."});
  CHECK(sentences("Wait... What happened?") == std::vector<std::string>{"Wait...", "What happened?"});
}

TEST_CASE("utf8: valid and invalid sequences") {
  CHECK(find_invalid_utf8("plain ascii text that is long enough for the fast path") == std::string_view::npos);
  CHECK(find_invalid_utf8("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80") == std::string_view::npos);
  CHECK(find_invalid_utf8("abc\xFF") == 3);
  CHECK(find_invalid_utf8("ab\xC3") == 2);                // truncated
  CHECK(find_invalid_utf8("x\xC0\xAF") == 1);             // overlong
  CHECK(find_invalid_utf8("\xED\xA0\x80") == 0);          // surrogate
  CHECK(find_invalid_utf8("0123456789\xE9t\xE9") == 10);  // Latin-1
}

TEST_CASE("wikitext: templates tables references comments and links") {
  const std::string wt =
      "{{Infobox person\n| name = {{nowrap|Ada}}\n| born = 1815\n}}\n"
      "'''Ada Lovelace''' (10 December 1815{{efn|Some note}}) was an [[England|English]] [[mathematician]]s "
      "and writer.<ref name=\"a\">{{cite book|title=X}}</ref> She worked on the [[Analytical Engine]].<ref name=b/>\n"
      "<!-- a hidden comment -->\n"
      "== Early life ==\n"
      "{| class=\"wikitable\"\n|-\n| cell || cell\n|}\n"
      "* a list item\n# numbered item\n: indented\n"
      "Her father was [[Lord Byron]]. See [https://example.org the site] and [https://example.org/x]. "
      "[[File:Ada.jpg|thumb|A [[portrait]] of Ada]]It was ''famous'' &amp; &lt;known&gt;.\n"
      "[[Category:Mathematicians]]\n[[fr:Ada Lovelace]]\n__NOTOC__\n";
  const std::string clean = clean_wikitext(wt);
  CHECK(
      clean ==
      "Ada Lovelace (10 December 1815) was an English mathematicians and writer. She worked on the Analytical Engine. "
      "Her father was Lord Byron. See the site and. It was famous & <known>.");
}

TEST_CASE("wikitext: nested templates parameters and unclosed constructs") {
  CHECK(clean_wikitext("A {{outer|{{inner|x}}|{{{param|d}}}}} B.") == "A B.");
  CHECK(clean_wikitext("Text {{unclosed template and more text.") == "Text unclosed template and more text.");
  CHECK(clean_wikitext("x<br/>y<small>z</small> &nbsp;w &#8212; &#x41;") == "x yz w \xE2\x80\x94 A");
  CHECK(clean_wikitext("<math>x^2</math>Only this.<gallery>\nA.jpg\n</gallery>") == "Only this.");
  CHECK(clean_wikitext("[[Paris (film)|]] and [[:Category:Films|films]]") == "Paris and films");
  CHECK(clean_wikitext("== Heading ==\n* list\n").empty());
}

TEST_CASE("wikipedia: a multistream bz2 dump gives one cleaned article per line") {
  TempDir dir;
  const std::string stream1 = kHeader + page("Ada", 0, "'''Ada''' was a [[mathematician]].&lt;ref&gt;x&lt;/ref&gt;") +
                              page("Talk:Ada", 1, "Talk page text.");
  const std::string stream2 = page("Old name", 0, "#REDIRECT [[Ada]]", true) +
                              page("Babbage", 0, "Charles {{tl|x}}Babbage built engines.") +
                              page("Empty", 0, "{{stub}}") + kFooter;
  write_text(dir / "dump.xml.bz2", bz2(stream1) + bz2(stream2));  // two concatenated streams
  WikipediaOptions o;
  o.dump = dir / "dump.xml.bz2";
  o.out = dir / "out";
  o.shards = 2;
  o.threads = 2;
  WikipediaStats st = run_wikipedia(o);
  CHECK(st.pages == 5);
  CHECK(st.articles == 2);
  CHECK(st.redirects == 1);
  CHECK(st.other_namespaces == 1);
  CHECK(st.empty == 1);
  const std::string all = read_text(dir / "out/wiki-00000.txt") + read_text(dir / "out/wiki-00001.txt");
  CHECK(read_text(dir / "out/wiki-00000.txt") == "Ada was a mathematician.\n");
  CHECK(read_text(dir / "out/wiki-00001.txt") == "Charles Babbage built engines.\n");
  CHECK(read_text(dir / "out/stats.json").find("\"articles\": 2") != std::string::npos);
}

TEST_CASE("wikipedia: thousands of pages across read-buffer and stream boundaries") {
  TempDir dir;
  std::string xml = kHeader, expected;
  for (int i = 0; i < 3000; ++i) {
    std::string body = "Article " + std::to_string(i) + " says";
    for (int k = 0; k < 40; ++k) body += " word" + std::to_string(k);
    body += ".";
    xml += page("Page " + std::to_string(i), 0,
                "{{Infobox|x=" + std::to_string(i) + "}}\n" + body + "\n== See also ==\n* [[Other]]");
    expected += body + "\n";
  }
  xml += kFooter;
  // Three bz2 streams cut at arbitrary byte offsets (inside pages), as multistream dumps are.
  const std::size_t third = xml.size() / 3;
  write_text(dir / "big.xml.bz2",
             bz2(xml.substr(0, third)) + bz2(xml.substr(third, third)) + bz2(xml.substr(2 * third)));
  WikipediaOptions o;
  o.dump = dir / "big.xml.bz2";
  o.out = dir / "out";
  o.shards = 1;
  const WikipediaStats st = run_wikipedia(o);
  CHECK(st.articles == 3000);
  CHECK(read_text(dir / "out/wiki-00000.txt") == expected);
  o.shards = 4;
  o.out = dir / "out4";
  run_wikipedia(o);
  std::size_t total = 0, smallest = SIZE_MAX, largest = 0;
  for (int i = 0; i < 4; ++i) {
    const std::size_t n = read_text(dir / ("out4/wiki-0000" + std::to_string(i) + ".txt")).size();
    total += n, smallest = std::min(smallest, n), largest = std::max(largest, n);
  }
  CHECK(total == expected.size());
  CHECK(largest - smallest < 400);  // balanced to within about one article
}

TEST_CASE("wikipedia: corrupt and truncated dumps are one-line errors naming the file") {
  TempDir dir;
  const std::string xml = kHeader + page("Ada", 0, "Text of the article.") + kFooter;
  std::string data = bz2(xml);
  std::string corrupt = data;
  for (std::size_t i = 40; i < 60 && i < corrupt.size(); ++i) corrupt[i] = static_cast<char>(corrupt[i] ^ 0x5A);
  write_text(dir / "corrupt.xml.bz2", corrupt);
  WikipediaOptions o;
  o.out = dir / "out";
  o.dump = dir / "corrupt.xml.bz2";
  CHECK_THROWS_WITH_AS(run_wikipedia(o), doctest::Contains("corrupt.xml.bz2: corrupt bz2 data"), Error);

  write_text(dir / "cut.xml.bz2", data.substr(0, data.size() / 2));
  o.dump = dir / "cut.xml.bz2";
  CHECK_THROWS_WITH_AS(run_wikipedia(o), doctest::Contains("cut.xml.bz2: "), Error);

  write_text(dir / "cut.xml", xml.substr(0, xml.find("</text>")));
  o.dump = dir / "cut.xml";
  CHECK_THROWS_WITH_AS(run_wikipedia(o), doctest::Contains("cut.xml: truncated XML: <page> at byte"), Error);

  write_text(dir / "notxml.bz2", bz2("hello, this is not a dump\n"));
  o.dump = dir / "notxml.bz2";
  CHECK_THROWS_WITH_AS(run_wikipedia(o), doctest::Contains("notxml.bz2: not a MediaWiki XML dump"), Error);
  CHECK_FALSE(std::filesystem::exists(dir / "out/wiki-00000.txt.tmp"));
}
