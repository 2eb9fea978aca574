"""Reviews: the one writer of a review and its stored state (store), the grading write path's plain SQL (sql), and
the reads of what counts."""
