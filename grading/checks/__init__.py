"""The deterministic checks of a draft: the rules document of a draft criteria version and its v1 vocabulary, how a
draft reads (structure, links, headings, prose), the findings that veto the judge, the repairs, and their CPU
budget. Pure Python over the text: nothing here reads the database or calls a model."""
