"""Generated sections of the docs: each generator owns the text between its markers and leaves the rest alone."""

from pathlib import Path


def replace_section(path: Path, name: str, text: str) -> None:
    """Puts `text` between `<!-- begin NAME -->` and `<!-- end NAME -->` in `path`, appending the markers if new."""
    begin, end = f"<!-- begin {name} (generated) -->", f"<!-- end {name} -->"
    block = f"{begin}\n{text.rstrip()}\n{end}\n"
    old = path.read_text() if path.exists() else ""
    if begin in old and end in old:
        head, rest = old.split(begin, 1)
        new = head + block + rest.split(end, 1)[1].lstrip("\n")
    else:
        new = (old.rstrip() + "\n\n" if old.strip() else "") + block
    path.write_text(new)
