"""Quality gate: approved scripts clear the hook threshold and stay within 80-150 words."""

import dagster as dg

from mdame_assets.defs.scripts.assets import scripts
from mdame_resources.state import StateStoreResource
from mdame_runtime.step import read_step

MIN_WORDS, MAX_WORDS = 80, 150


@dg.asset_check(
    asset=scripts,
    blocking=True,
    description="Every script not rejected has a best hook scoring at least the day's "
    "hook_threshold (the dimension's YAML, tuned weekly: `mdame params show <dimension>`) and "
    f"{MIN_WORDS}-{MAX_WORDS} words. Blocking: scene planning and all after wait and the "
    "content run fails (a run_failure alert). When it fails, the problems name each script and "
    "its score or length: the writer rejects such scripts itself, so a rerun fails the same "
    "way; it is a bug or a hand-edited row: report it with the problems.",
)
def hook_score(
    context: dg.AssetCheckExecutionContext, state: StateStoreResource
) -> dg.AssetCheckResult:
    step = read_step(context, state.get_client(), "hook_score")
    threshold, problems, scores = step.params.hook_threshold, [], []
    for unit in step.units("script"):
        if unit.state == "rejected":
            continue
        script = unit.payload["script"]
        scores.append(script["hook_score"])
        if script["hook_score"] < threshold:
            problems.append(f"script {unit.id}: hook {script['hook_score']:.2f} < {threshold}")
        if not MIN_WORDS <= script["word_count"] <= MAX_WORDS:
            problems.append(f"script {unit.id}: {script['word_count']} words")
    return dg.AssetCheckResult(
        passed=not problems, metadata={"problems": problems, "hook_scores": scores}
    )
