"""Regression sets: items frozen with the answers people expected (`build`), runs of a criteria version over them
(`runs`), and what an erasure takes from them (`erasure`)."""
