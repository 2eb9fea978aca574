"""What each figure counts (one table: `definitions`, written as SQL by `expressions`), and the agreement
statistics read from the counters (`agreement`, `raters`)."""
