"""scikit-learn's 20 Newsgroups header, footer and quote strippers (sklearn.datasets._twenty_newsgroups),
so attnexp's data.remove means exactly what sklearn's fetch_20newsgroups(remove=...) does.
tests/unit/test_private_apis.py holds them to the installed scikit-learn."""

from __future__ import annotations


def newsgroup_strippers():
    """(strip_newsgroup_header, strip_newsgroup_footer, strip_newsgroup_quoting); ImportError without sklearn."""
    from sklearn.datasets._twenty_newsgroups import strip_newsgroup_footer, strip_newsgroup_header, strip_newsgroup_quoting

    return strip_newsgroup_header, strip_newsgroup_footer, strip_newsgroup_quoting
