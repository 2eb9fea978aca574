"""The queue's pages, one module per part: the queue and an item's page with its decision, claims and assignment
(`queue`), a draft's correction (`corrections`) and a conversation's expected replies (`expected_replies`)."""
