/**
 * `rx eval`: each recorded model decision of the goals asked again of another model (`Eval` in
 * @rx/host does it), shown as a table per goal and a summary, or one JSON object; progress on
 * stderr. With `--min-agreement`, the exit code is a gate.
 */
import type { FileSystem, Path } from "@effect/platform"
import * as Eval from "@rx/host/Eval"
import { Console, Effect, Schema } from "effect"
import * as ExitCode from "../ExitCode.js"
import * as Render from "../Render.js"
import type * as Usage from "../Usage.js"
import { type ExitStatus, say, setExit } from "./goal.js"

/** A decision in one cell: its calls (tool and short input), else why none was valid. */
const cell = (decision: Eval.Decision | null, error: string | null, width: number): string => {
  if (decision === null) return Render.cap(`(failed: ${error ?? "?"})`, width)
  if (decision.calls.length === 0) {
    const kinds = [...new Set(decision.rejected.map((r) => r.kind))].join(", ")
    return `(no valid action${kinds === "" ? "" : `: ${kinds}`})`
  }
  return Render.cap(decision.calls.map((c) => `${c.tool} ${JSON.stringify(c.input)}`).join("; "), width)
}

const percent = (share: number) => `${Math.round(share * 1000) / 10}%`

/** Agreement, counts by kind, tokens and time, in two lines. */
const summaryLines = (s: Eval.Summary): ReadonlyArray<string> => [
  `agreement ${percent(s.agreement)} (${s.byKind.same} of ${Render.plural(s.requests, "decision")}): ${Eval.kinds.map((k) => `${k} ${s.byKind[k]}`).join(", ")}`,
  `tokens ${s.usage.inputTokens} in, ${s.usage.outputTokens} out (recorded: ${s.recordedUsage.inputTokens} in, ${s.recordedUsage.outputTokens} out); ${s.msPerRequest} ms per request`
]

/** A goal's table: one row per recorded decision, the approvals people gave marked. */
export const table = (goal: Eval.GoalReport): ReadonlyArray<string> => {
  const width = 44
  const rows = goal.steps.map((step) => {
    const marks = step.approvals.map((a) => ` [${a.approved ? "approved" : "denied"} by ${a.by}]`).join("")
    return `  ${String(step.iteration).padStart(4)}  ${step.kind.padEnd(11)}  ${(cell(step.recorded, null, width) + marks).padEnd(width)}  ${cell(step.candidate, step.error, width)}`
  })
  return [
    `goal ${goal.goalId}: ${Render.cap(goal.goal.replace(/\s+/g, " "), 100)}`,
    `  step  ${"kind".padEnd(11)}  ${"recorded".padEnd(width)}  candidate`,
    ...rows,
    ...summaryLines(goal.summary).map((line) => `  ${line}`)
  ]
}

export const evaluate = (flags: Usage.Input<typeof Usage.evaluate>): Effect.Effect<void, unknown, FileSystem.FileSystem | Path.Path | ExitStatus> =>
  Effect.gen(function*() {
    let total = 0
    let done = 0
    const { minAgreement, model, report } = yield* Eval.fromLog({
      goalIds: flags.arg,
      given: flags.settings,
      concurrency: flags.concurrency,
      starting: (start) =>
        Effect.sync(() => (total = start.requests)).pipe(
          Effect.zipRight(Console.error(Render.terminal(`rx eval: ${Render.plural(start.requests, "recorded decision")} of ${Render.plural(start.goals, "goal")}, asked of ${start.model}; no tool runs`)))
        ),
      onStep: (goalId, step) =>
        Effect.suspend(() => Console.error(Render.terminal(`rx eval: ${++done}/${total} goal ${goalId} step ${step.iteration}: ${step.kind}${step.error === null ? "" : ` (${step.error})`}`)))
    })
    const passes = minAgreement === undefined || Eval.passes(report, minAgreement)
    if (flags.json) {
      const encoded = Schema.encodeSync(Eval.Report)(report)
      yield* Console.log(Render.jsonLine(JSON.stringify({ model, minAgreement: minAgreement ?? null, passes, ...encoded })))
    } else {
      yield* say([
        ...report.goals.flatMap((goal) => [...table(goal), ""]),
        `summary of ${Render.plural(report.goals.length, "goal")}, asked of ${model}:`,
        ...summaryLines(report.summary).map((line) => `  ${line}`),
        ...(minAgreement === undefined ? [] : [`  ${passes ? "passes" : "fails"} --min-agreement ${minAgreement}${passes ? "" : ` (exit ${ExitCode.belowAgreement})`}`])
      ].join("\n"))
    }
    yield* setExit(passes ? 0 : ExitCode.belowAgreement)
  })
