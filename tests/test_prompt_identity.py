"""The mini-bvb agent's texts and Dual VQA's judge instructions, as our code fills them, pinned by sha256 and length.

Each pin was computed from a hand transcription of the release's Python string literal (callingforhelp/BVB, MIT),
evaluated with the sample values below, never from our templates: a later edit of a template (a space, a newline,
an em dash typed as "--") fails here. The release files: sandbox/bvb_sandbox/agents/bash_agent.py (module
bvb_sandbox.agents.bash_agent) and eval/dual_vqa_metric.py (ask_vlm). None of the release's code runs here.
"""

import hashlib

import pytest

from bvb_addon.agent import mini_bvb_protocol as mini
from eval_bridge.scoring.protocols import dual_vqa_v1

pytestmark = pytest.mark.unit

QUESTION = "How many chairs are in this room?"

# name: (our filled text, (length, sha256 of the release literal filled with the same values))
PINS = {
    # bash_agent.py SYSTEM_PROMPT (a triple-quoted literal ending in a newline)
    "system": (
        lambda: mini.system_prompt(),
        (2862, "b0df0e20c9e8d147a70376fe7e83e078405aace8766e983a0c4a3d33afdd8ca6"),
    ),
    # bash_agent.py run_bash_agent: the first user message (five implicitly joined f-strings), scene_name
    # "scene0000_00", dataset "scannet", duration 42.0, cost_limit 3.0
    "task": (
        lambda: mini.task_message("scene0000_00", "scannet", 42.0, 3.0),
        (313, "19772a23301a33933b84f5d9b33e4edd77a646082c5d043140bcbae7c5ea03c2"),
    ),
    # the same f-strings with dataset None (the release's f-string writes "None"), duration 7.25, cost_limit 0.5
    "task_no_dataset": (
        lambda: mini.task_message("42446103", None, 7.25, 0.5),
        (305, "70af67e5849fe7ba3633dae4a991f236c13d14095ee06430d622b9a91b9f6290"),
    ),
    # bash_agent.py run_bash_agent `nudge`, its first branch (frames_seen == 0)
    "nudge_no_frames": (
        lambda: mini.nudge(0),
        (103, "34ad398e3314e36ae29f3b238afc80fc19e10646ada8647da5f5d42ac2946796"),
    ),
    # bash_agent.py run_bash_agent `nudge`, its else branch
    "nudge_no_blocks": (
        lambda: mini.nudge(3),
        (147, "2e33068d4fc1d0d572177f4bb0c13c6baa0492f9922ed569d1a652d4ef7f50fa"),
    ),
    # bash_agent.py budget_note: its f-string, cost 0.5 of 3.0 (no warning)
    "budget": (
        lambda: mini.budget_note(0.5, 3.0),
        (45, "0380a0e7f38ba6919dc5828610df1cbb3f154c3a6c0d061250f3ebcfc1834b40"),
    ),
    # bash_agent.py budget_note: the f-string with `warn`'s literal (" You are LOW ..."), cost 2.5 of 3.0
    "budget_low": (
        lambda: mini.budget_note(2.5, 3.0),
        (104, "878b774d27551ab0bb826de0f7c1d0fbd9e4e9463a625cd4f50fdd5c0d02e295"),
    ),
    # bash_agent.py _truncate's marker literal
    "truncated": (
        lambda: mini.text("truncated"),
        (19, "1518152caef8007257065564f6f706a8f5352fd8979c3b3571a547e39fb2cb4b"),
    ),
    # bash_agent.py _frame_parts' f-string, ts 12.5
    "frame_label": (
        lambda: mini.frame_label(12.5),
        (16, "c6c84361465e2963d6c9d7983bdcd5768d0a873a762251834b6a8d7b9a1c4bf8"),
    ),
    # bash_agent.py run_bash_agent feedback chunk (two joined f-strings), block "ls /workspace", exit 2,
    # stdout "a\n", stderr "no such file" (both short: _truncate leaves them)
    "bash_result": (
        lambda: mini.bash_result("ls /workspace", 2, "a\n", "no such file"),
        (40, "552cd260fcfb17e41ee2e6691379296610a863bf80089c39fff24c0b5164be2f"),
    ),
    # bash_agent.py run_bash_agent's fallback literal for an empty observation
    "no_frames": (
        lambda: mini.text("no_frames"),
        (41, "ce748141c42b792e5d16f672f3685ea36cfcb99d3b7399c79094b9d0c85aabab"),
    ),
    # dual_vqa_metric.py ask_vlm `prompt`, the frames branch (four joined literals, the last an f-string)
    "dual_vqa_v1_frames": (
        lambda: dual_vqa_v1.instruction(QUESTION),
        (259, "9a37c380267d930c72baed4e7196249170ae48a910c67ac09fd09f2000c7b191"),
    ),
    # dual_vqa_metric.py ask_vlm `prompt`, the frames_b64 None branch (--text-only; six joined literals)
    "dual_vqa_v1_text_only": (
        lambda: dual_vqa_v1.instruction(QUESTION, frames=False),
        (340, "b49cf1b1c1a5ead66f34f6954114cbd267c514ea3a575e9639630f82bb9a8a89"),
    ),
}


@pytest.mark.parametrize("name", sorted(PINS))
def test_each_filled_text_is_the_release_literal_byte_for_byte(name):
    fill, (length, sha256) = PINS[name]
    filled = fill()
    assert (len(filled), hashlib.sha256(filled.encode("utf-8")).hexdigest()) == (length, sha256), (
        f"{name}: the text differs from the release's literal; restore the template from the release"
    )


def test_the_templates_are_read_as_stored_with_only_the_release_s_one_non_ascii_character():
    # The release's literals hold one character beyond ASCII, the em dash (U+2014) of the system prompt and the
    # task message; a template saved through an editor that turns it into "--" or adds a BOM or CRLF fails here.
    texts = [mini.text(name) for name in ("system", "task", "nudge_no_frames", "nudge_no_blocks", "budget")]
    texts += [(dual_vqa_v1.PROMPTS / f"{name}.txt").read_bytes().decode("utf-8") for name in (
        "dual_vqa_v1_frames", "dual_vqa_v1_text_only")]  # fmt: skip
    assert {c for text in texts for c in text if ord(c) > 127} == {"\u2014"}
    assert not any("\r" in text or text.startswith("\ufeff") for text in texts)
    assert mini.system_prompt().count("\u2014") == 2 and mini.text("task").count("\u2014") == 1
