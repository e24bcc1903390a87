"""The HTML → Markdown conversion web_fetch makes (docs/tools.md "web_fetch"), in whichever thread or process
runs it: tools/web/page.py in a worker thread, tools/web/isolated.py in a child process for a deep page.

html-to-markdown: pyproject.toml says why (measured against markdownify, html2text and trafilatura).
"""

from __future__ import annotations

# Dropped before conversion besides scripts, styles, forms and the site's header/navigation, which the
# converter's "standard" preprocessing removes (it keeps an article's own header, with its heading). Only
# simple selectors: html-to-markdown 3.21 ignores selectors with combinators or :not().
_DROPPED = [
    "nav", "aside", "footer", "noscript", "template", "iframe", "svg", "dialog",
    "[role=navigation]", "[role=banner]", "[role=contentinfo]", "[role=complementary]", "[aria-hidden=true]",
]  # fmt: skip


def markdown_of(page: str, url: str) -> str:
    """The page as Markdown. The library is imported by the first call (it costs start-up time)."""
    import html_to_markdown as h2m

    options = h2m.ConversionOptions(
        extract_metadata=False,  # the title is reported apart; no YAML front matter in the text
        base_url=url,  # relative links become absolute: the model can fetch them next
        exclude_selectors=_DROPPED,
        skip_images=False,
        preprocessing=h2m.PreprocessingOptions(
            enabled=True, preset="standard", remove_navigation=True, remove_forms=True
        ),
    )
    result = h2m.convert(page.replace("\0", ""), options)
    return str(result.content or "").strip() + "\n"
