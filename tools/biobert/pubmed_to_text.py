#!/usr/bin/env python3
"""pubmed_to_text.py - one PubMed baseline XML file (.xml.gz) -> one abstract per line (title + abstract text,
whitespace collapsed; citations without an abstract are skipped), written atomically. Python stdlib only.
    python3 tools/biobert/pubmed_to_text.py pubmed24n0001.xml.gz pubmed24n0001.txt
"""
import gzip
import os
import sys
import xml.etree.ElementTree as ET


def text_of(element):
    return " ".join("".join(element.itertext()).split()) if element is not None else ""


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    src, dst = sys.argv[1], sys.argv[2]
    os.makedirs(os.path.dirname(dst) or ".", exist_ok=True)
    kept = skipped = 0
    with gzip.open(src, "rb") as f, open(dst + ".tmp", "w", encoding="utf-8") as out:
        for _, el in ET.iterparse(f, events=("end",)):
            if el.tag != "PubmedArticle":
                continue
            article = el.find("MedlineCitation/Article")
            abstract = " ".join(text_of(a) for a in article.findall("Abstract/AbstractText")) if article is not None else ""
            if abstract:
                title = text_of(article.find("ArticleTitle"))
                out.write((title + " " + abstract).strip() + "\n")
                kept += 1
            else:
                skipped += 1
            el.clear()
    os.replace(dst + ".tmp", dst)
    print(f"{dst}: {kept} abstracts ({skipped} citations without one skipped)")


if __name__ == "__main__":
    main()
