// fuzz_wiki_dump.cpp - Wikipedia XML dumps (core/src/data/wiki_dump.cpp: plain or bzip2, split into pages)
// and the wikitext cleaner (core/src/data/wikitext.cpp) on every page the reader returns.
#include "data/wiki_dump.hpp"
#include "data/wikitext.hpp"
#include "fuzz_util.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace bertx;
  const std::string path = fuzz::write_file("dump.xml", {reinterpret_cast<const char*>(data), size});
  fuzz::expect_ok_or_error([&] {
    data::WikiDumpReader reader(path);
    data::WikiPage page;
    int pages = 0;
    while (reader.next(page) && ++pages < 10000) {
      const std::string clean = data::clean_wikitext(page.text);
      (void)data::decode_entities(page.title);
      if (clean.size() > page.text.size() * 4 + 64) std::abort();  // cleaning never blows text up
    }
  });
  return 0;
}
