"""How the guide tests read a page's blocks: what runs, what is shown, and that a block
neither runs nor is marked is an error (tests/suite/guide_blocks.py)."""

from __future__ import annotations

import pytest

from tests.suite.guide_blocks import blocks

PAGE = """# A page

```python
# myshop/tools.py
x = 1
```

<!-- settings in GLOVE_AGENTS["coffee"] -->

```python
"handoff": {"group": "baristas"},
```

```bash
TOKEN=$(python manage.py create_api_token ann --create-user)
```

```text
output
```

1. In a list:

   <!-- not run: it serves until stopped -->

   ```sh
   daphne mysite.asgi:application
   ```
"""


def read(tmp_path, text: str):
    docs = tmp_path / "docs" / "howto"
    docs.mkdir(parents=True)
    page = docs / "page.md"
    page.write_text(text)
    return blocks(page, root=tmp_path)


def test_it_reads_each_block_as_its_fence_and_its_note_say(tmp_path):
    found = read(tmp_path, PAGE)

    assert [block.kind for block in found] == ["file", "settings", "shell", "shown", "skipped"]
    assert found[0].file == "myshop/tools.py"
    assert found[1].settings_code() == (
        '_merge_into(GLOVE_AGENTS, [\'coffee\'], {\n"handoff": {"group": "baristas"},\n\n})'
    )
    assert found[4].code == "daphne mysite.asgi:application\n"
    assert found[2].where == "howto/page.md:14"


@pytest.mark.parametrize(
    "text",
    ["```\nls\n```\n", "```ruby\nputs 1\n```\n", "<!-- not run: -->\n\n```bash\nls\n```\n"],
    ids=["bare", "unknown-language", "no-reason"],
)
def test_a_block_neither_run_nor_marked_is_an_error(tmp_path, text):
    (block,) = read(tmp_path, text)

    with pytest.raises(ValueError, match=r"howto/page\.md:"):
        block.kind  # noqa: B018
