"""Defaults shared by the add-on, the headless runner and the bridge client."""

PROVIDER_BASE_URL = "https://api.openai.com/v1"
API_KEY_ENV = "OPENAI_API_KEY"
BRIDGE_URL = "http://127.0.0.1:8765"
MODEL = "gpt-4o-mini"
COST_LIMIT_USD = 3.00
