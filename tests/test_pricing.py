"""Where prices come from: flags, then the override table, then genai-prices; the judge prices the same way."""

import json
import sys

import genai_prices
import pytest

from bvb_addon.pricing import PRICES_FILE, PriceError, load_table, price_for
from eval_bridge.scoring.pricing import Pricing

pytestmark = pytest.mark.unit


def test_genai_prices_is_the_default_source_and_says_its_version_and_context_window():
    price = price_for("gpt-4o")
    assert (price.source, price.version, price.provider) == ("genai-prices", genai_prices.__version__, "openai")
    assert price.context_window == 128_000 and price.input > 0 and price.output > price.input
    # Provider prefixes and dated snapshots find the same model.
    assert price_for("openai/gpt-4o-2024-08-06").model_id == "gpt-4o"
    assert price.describe()["source"] == "genai-prices"


def test_models_newer_than_the_old_table_are_priced_without_flags():
    for model in ("claude-opus-5.5", "gpt-6-astra"):
        price = price_for(model)
        assert price.source == "genai-prices" and price.input > 0 and price.context_window


def test_tiered_prices_make_a_long_prompt_cost_the_long_context_rate():
    price = price_for("gemini-2.5-pro")
    flat = (400_000 * price.input + 4096 * price.output) / 1e6
    assert price.worst_case(400_000, 4096) > 1.5 * flat
    assert price.worst_case(100_000, 4096) == pytest.approx((100_000 * price.input + 4096 * price.output) / 1e6)


def test_the_repository_table_overrides_genai_prices_and_flags_override_both(tmp_path):
    table_file = tmp_path / "prices.json"
    table_file.write_text(
        json.dumps({"updated": "2026-11-30", "models": {"gpt-4o": {"input": 9.0, "cached_input": 9.0, "output": 99.0}}})
    )
    table = load_table(table_file)
    price = price_for("gpt-4o", table=table)
    assert (price.source, price.version, price.output) == ("table", "2026-11-30", 99.0)
    flagged = price_for("gpt-4o", 1.0, 2.0, table=table)
    assert (flagged.source, flagged.input, flagged.cached_input, flagged.output) == ("flags", 1.0, 1.0, 2.0)
    # The shipped table holds only models genai-prices does not list (self-hosted ones).
    assert price_for("qwen2.5-vl-72b-instruct").source == "table"


def test_an_unknown_model_fails_with_the_one_line_fix():
    with pytest.raises(
        PriceError, match=r"no price for model 'acme-vision-9' in genai-prices .* --price-in and --price-out"
    ):
        price_for("acme-vision-9")


def test_without_genai_prices_the_table_and_flags_still_price(monkeypatch):
    # The extension without its wheels: the package cannot be imported.
    monkeypatch.setitem(sys.modules, "genai_prices", None)
    assert price_for("qwen2.5-vl-72b-instruct").source == "table"
    assert price_for("gpt-4o", 2.5, 10.0).source == "flags"
    with pytest.raises(PriceError, match=rf"no price for model 'gpt-4o' in {PRICES_FILE.name};"):
        price_for("gpt-4o")


def test_the_judge_prices_through_the_same_lookup():
    pricing = Pricing("gpt-4o")
    assert pricing.known and pricing.price.source == "genai-prices"
    usage = {"prompt_tokens": 1_000_000, "completion_tokens": 0}
    assert pricing.cost(usage) == pytest.approx(price_for("gpt-4o").input)
    assert pricing.cost({**usage, "cost": 0.25}) == 0.25
    unknown = Pricing("acme-judge", unpriced=True)
    assert not unknown.known and unknown.cost(usage) == 0.0


def test_a_judge_model_with_no_known_price_is_refused_unless_accepted_or_local(caplog):
    """Issue 42 point 9: it was costed at $0 without a word; an unpriced agent model is refused."""
    with pytest.raises(PriceError, match=r"judge model 'acme-judge' has no price .*--price-in and --price-out.*"
                                         r"--judge-unpriced"):  # fmt: skip
        Pricing("acme-judge", base_url="https://judge.example.com/v1")
    assert Pricing("acme-judge", 1.0, 2.0, base_url="https://judge.example.com/v1").known
    usage = {"prompt_tokens": 1000, "completion_tokens": 10}
    with caplog.at_level("WARNING", logger="eval_bridge.scoring.pricing"):
        for pricing in (Pricing("acme-judge", base_url="https://judge.example.com/v1", unpriced=True),
                        Pricing("acme-judge", base_url="http://127.0.0.1:8000/v1")):  # served here: no price  # fmt: skip
            assert not caplog.records or len(caplog.records) == 1  # said at the first call it prices, not before
            assert pricing.cost(usage) == 0.0 and pricing.cost(usage) == 0.0  # once per judge
    notes = [record.getMessage() for record in caplog.records]
    assert len(notes) == 2 and all("count as $0" in note and "\n" not in note for note in notes)
    assert "--judge-unpriced" in notes[0] and "a local endpoint" in notes[1]
