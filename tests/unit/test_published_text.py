"""Links, handles, e-mail addresses and phone numbers found and taken out of published text;
ordinary text (numbers, abbreviations, times, hashtags) left exactly as it was."""

from __future__ import annotations

import pytest

from mdame_domain.published_text import (
    contact_detail_problem,
    find_contact_details,
    publishable_script,
    strip_contact_details,
    strip_from_narration,
)
from mdame_domain.writer import Script


@pytest.mark.parametrize(
    ("text", "kind", "found"),
    [
        ("Visit https://deals.example/x?a=1 now", "url", "https://deals.example/x?a=1"),
        ("see http://example.org.", "url", "http://example.org"),
        ("(www.example.net/offer)", "url", "www.example.net/offer"),
        ("Get it at example.com today", "domain", "example.com"),
        ("short link bit.ly/x3Yz, quick", "domain", "bit.ly/x3Yz"),
        ("news.example.co.uk/story reports", "domain", "news.example.co.uk/story"),
        # The Public Suffix List, in any case: every top-level domain, not a fixed few.
        ("Visit SCAM.COM", "domain", "SCAM.COM"),
        ("bets at promo.bet tonight", "domain", "promo.bet"),
        ("see Example.Com/Deals.", "domain", "Example.Com/Deals"),
        ("play at Lucky.Casino", "domain", "Lucky.Casino"),
        ("our page user.github.io", "domain", "user.github.io"),
        ("at scam.com.zz now", "domain", "scam.com"),
        ("see example.com.It is free", "domain", "example.com"),
        # Names that are domains too: a viewer could type them in.
        ("built on ASP.NET", "domain", "ASP.NET"),
        ("run setup.py", "domain", "setup.py"),
        ("Mail tips@news.example.com!", "email", "tips@news.example.com"),
        ("write to a.b+c@mail.example", "email", "a.b+c@mail.example"),
        ("Follow @science_daily.", "handle", "@science_daily"),
        ("thanks @NASA", "handle", "@NASA"),
        ("ask @x", "handle", "@x"),
        ("Call +1 555 013 2999 now", "phone", "+1 555 013 2999"),
        ("or (555) 013-2999 today", "phone", "(555) 013-2999"),
        ("dial 555.013.2999", "phone", "555.013.2999"),
        ("ring 020 7946 0958", "phone", "020 7946 0958"),
        ("+44 20 7946 0958", "phone", "+44 20 7946 0958"),
        # Full-width look-alikes are folded before matching, and removed as written.
        ("\uff45\uff58\uff41\uff4d\uff50\uff4c\uff45\uff0e\uff43\uff4f\uff4d", "domain", None),
        ("\uff20\uff53\uff43\uff41\uff4d", "handle", None),
    ],
)
def test_contact_details_are_found(text: str, kind: str, found: str | None) -> None:
    [detail] = find_contact_details(text)
    assert detail.kind == kind
    assert detail.text == (found if found is not None else text)
    assert text[detail.start : detail.end] == detail.text


@pytest.mark.parametrize(
    "text",
    [
        "3.5 million people watched",
        "e.g. a battery, i.e. a cell",
        "the U.S. and the U.K. agreed",
        "written in Node.js and Vue.js, Next.js and Chart.js",
        "the end.It was over, and so.So what",
        "at 10:30 on 2024-05-01, or 31.12.2024",
        "from 1999 to 2024, and 1999 2000 2001",
        "a 3.14159 ratio and 40.7128, -74.0060",
        "1,000,000,000 and 1 000 000 000 and 1.000.000.000 stars",
        "#science #space are hashtags",
        "Meet @ 5pm, or @10:30",
        "Dr. Smith, Ph.D., at 9 a.m. in St. Louis, No. 1 again",
        "version 1.2.3 of report.pdf and notes.txt, or v2.0.1",
        "the suffix co.uk alone",
        "123456789012 is one number",
    ],
)
def test_ordinary_text_has_no_contact_details(text: str) -> None:
    assert find_contact_details(text) == ()
    assert strip_contact_details(text) == (text, ())


def test_stripping_takes_a_dangling_connector_and_tidies_punctuation() -> None:
    text = "Read more at https://x.example/a, or mail tips@x.example (@xnews)."
    cleaned, details = strip_contact_details(text)
    assert cleaned == "Read more, or mail."
    assert [d.kind for d in details] == ["url", "email", "handle"]


def test_narration_drops_a_sentence_that_was_only_the_link() -> None:
    text = (
        "Apple announced a chip. Read more at https://x.example/m6. "
        "The first laptops ship next month, says @apple. Visit bit.ly/x!"
    )
    cleaned, details = strip_from_narration(text)
    assert cleaned == "Apple announced a chip. The first laptops ship next month, says."
    assert len(details) == 3


def _script(hook: str, body: tuple[str, ...], cta: str) -> Script:
    text = " ".join([hook, *body, cta])
    return Script(
        hook=hook,
        hook_score=0.8,
        hook_candidates=((hook, 0.8), ("Another hook at example.com for you", 0.5)),
        body_sentences=body,
        call_to_action=cta,
        text=text,
        word_count=len(text.split()),
    )


FILLER = tuple(
    f"Sentence {n} says something plain about batteries and the phones they power."
    for n in range(8)
)


def test_a_script_is_published_without_its_contact_details() -> None:
    script = _script(
        "Why could this battery double the life of your phone, asks @deals?",
        (*FILLER, "Order samples at https://deals.example/cells or call +1 555 013 2999."),
        "Follow us on @tech60 for more stories like this.",
    )
    result = publishable_script(script)
    assert result.publishable and result.refused == ()
    published = result.script
    for field in (published.hook, published.text, published.call_to_action):
        assert find_contact_details(field) == (), field
    assert all(find_contact_details(s) == () for s in published.body_sentences)
    assert all(find_contact_details(h) == () for h, _ in published.hook_candidates)
    assert published.hook == "Why could this battery double the life of your phone, asks?"
    assert published.call_to_action == "Follow us for more stories like this."
    assert published.body_sentences[-1] == "Order samples or call."
    assert published.hook_candidates[0] == (published.hook, 0.8)
    assert published.word_count == len(published.text.split())
    assert published.text == " ".join(
        [published.hook, *published.body_sentences, published.call_to_action]
    )
    # The audit names kinds and fields, never the hostile link itself.
    assert "removed 1 url, 1 phone from the body" in result.removed
    assert not any("deals.example" in note for note in result.removed)


def test_a_clean_script_is_the_same_object() -> None:
    script = _script("Why is everyone talking about 3.5 million batteries?", FILLER, "Follow us.")
    assert publishable_script(script).script is script


@pytest.mark.parametrize(
    ("hook", "cta", "body", "why"),
    [
        ("Win at bit.ly/free-phone-now and @freephones", "Follow us.", FILLER, "hook"),
        ("See https://deals.example/a-very-long-path now", "Follow us.", FILLER, "hook"),
        ("Why does this battery matter to you?", "Follow @tech60.", FILLER, "call to action"),
        ("Why does this battery matter to you?", "Follow us.", ("Visit bit.ly/x.",), "body"),
        (
            "Why does this battery matter to you?",
            "Follow us.",
            (*FILLER[:5], "Contacts: example.com, @x, +1 555 013 2999."),
            "words",
        ),
    ],
)
def test_a_script_that_is_mostly_contact_details_is_refused(
    hook: str, cta: str, body: tuple[str, ...], why: str
) -> None:
    result = publishable_script(_script(hook, body, cta))
    assert not result.publishable
    assert any(why in reason for reason in result.refused), result.refused
    # Even refused, what gets recorded carries none of it.
    assert find_contact_details(result.script.text) == ()


def test_settings_published_as_written_are_refused_with_the_detail_named() -> None:
    assert contact_detail_problem("science") is None
    problem = contact_detail_problem("bit.ly/deal")
    assert problem is not None and "domain" in problem and "bit.ly/deal" in problem
