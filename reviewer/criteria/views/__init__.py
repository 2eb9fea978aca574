"""The criteria admins' pages, one module per part: the versions (the list, the editor, the diff, the preview,
trials, publishing, an item's reviews), their worked examples, and the spend caps."""
