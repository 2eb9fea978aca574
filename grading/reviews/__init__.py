"""Reviews: the one writer of a review and its stored state (store), and the reads of what counts."""
