"""The `untrusted` template filters: markup stays text, invisible and bidi characters become visible markers."""

from django.template import Context, Template

from reviewer.templatetags.untrusted import untrusted, untrusted_plain


def test_it_escapes_markup_and_isolates_the_text():
    assert untrusted('<b onclick="x">id</b> & co') == (
        '<bdi class="untrusted">&lt;b onclick=&quot;x&quot;&gt;id&lt;/b&gt; &amp; co</bdi>'
    )


def test_it_shows_bidi_controls_zero_width_and_control_characters_as_named_markers():
    shown = untrusted("cv-\u202eevil\u200b\x1b\u2028\u00ad")
    assert shown == (
        '<bdi class="untrusted">cv-'
        '<span class="ctl" title="right-to-left override">⟨U+202E⟩</span>evil'
        '<span class="ctl" title="zero width space">⟨U+200B⟩</span>'
        '<span class="ctl" title="control character">⟨U+001B⟩</span>'
        '<span class="ctl" title="line separator">⟨U+2028⟩</span>'
        '<span class="ctl" title="soft hyphen">⟨U+00AD⟩</span></bdi>'
    )


def test_text_in_other_scripts_is_shown_as_it_is():
    assert untrusted("שלום · Привет · délve") == '<bdi class="untrusted">שלום · Привет · délve</bdi>'


def test_the_plain_form_has_the_markers_and_no_markup_and_is_escaped_by_the_template():
    assert untrusted_plain("a\u202eb") == "a⟨U+202E⟩b"
    rendered = Template("{% load untrusted %}<title>{{ v|untrusted_plain }}</title>{{ v|untrusted }}").render(
        Context({"v": "<i>\u202e</i>"})
    )
    marker = '<span class="ctl" title="right-to-left override">⟨U+202E⟩</span>'
    assert (
        rendered
        == f'<title>&lt;i&gt;⟨U+202E⟩&lt;/i&gt;</title><bdi class="untrusted">&lt;i&gt;{marker}&lt;/i&gt;</bdi>'
    )


def test_nothing_renders_as_empty():
    assert (untrusted(None), untrusted_plain(None)) == ('<bdi class="untrusted"></bdi>', "")
