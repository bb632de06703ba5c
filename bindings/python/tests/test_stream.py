"""Session.stream(prompt): the text piece by piece, one piece per decoding
step, joining to the text of generate() on the same prompt."""
import pytest

from entmtp import Session

PROMPT = "Hello the world"


def generated_text(model, tokens):
    if tokens and model.is_eog(tokens[-1]):
        tokens = tokens[:-1]
    return model.detokenize(tokens)


@pytest.mark.parametrize("heads_name", ["medusa", "hydra", None])
def test_stream_joins_to_generate(request, model, bank2, heads_name):
    heads = request.getfixturevalue(heads_name) if heads_name else None
    bank = bank2 if heads else None
    with Session(model, heads, bank) as s:
        s.prefill(model.tokenize(PROMPT, parse_special=True))
        want = generated_text(model, s.generate(40))
    with Session(model, heads, bank) as s:
        pieces = list(s.stream(PROMPT, 40, chat=False))
        steps = s.stats().n_steps
    assert "".join(pieces) == want
    assert all(isinstance(p, str) and p for p in pieces)
    assert len(pieces) <= steps


def test_stream_token_prompt_and_early_exit(model, medusa, bank2):
    ids = model.tokenize(PROMPT, parse_special=True)
    with Session(model, medusa, bank2) as s:
        first = next(iter(s.stream(ids, 40)))
        n = len(s.tokens())
    assert first and n > len(ids)  # the session keeps what the first step produced

