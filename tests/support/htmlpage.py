"""A page's elements, table cells and notes as a browser's parser sees them (for report tests)."""
from html.parser import HTMLParser


class Page(HTMLParser):
    def __init__(self, text):
        super().__init__()
        self.tags, self.cells, self.imgs, self.notes, self._cell, self._note = [], [], [], [], None, None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag == "img":
            self.imgs.append(dict(attrs))
        if tag == "td":
            self._cell = ""
        if tag == "p" and ("class", "note") in attrs:
            self._note = ""

    def handle_data(self, data):
        if self._cell is not None:
            self._cell += data
        if self._note is not None:
            self._note += data

    def handle_endtag(self, tag):
        if tag == "td" and self._cell is not None:
            self.cells.append(self._cell.strip())
            self._cell = None
        if tag == "p" and self._note is not None:
            self.notes.append(self._note)
            self._note = None
