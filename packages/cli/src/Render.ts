/**
 * What `rx` prints: one line per step while a goal runs, and the views of `inspect` and
 * `list`. Pure functions of events, so the same log always prints the same way.
 */
import { Event, GoalSummary, Options, State } from "@rx/kernel"
import type { Doctor } from "@rx/store-sqlite"

/**
 * Characters a terminal would act on rather than show: C0 controls but tab and newline, DEL,
 * C1 controls (8-bit CSI, OSC, ...), and the Unicode controls that reorder or break lines
 * (bidi overrides and isolates, line and paragraph separators).
 */
const unsafe = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g

const escape = (c: string) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`

/**
 * Text for the terminal: every control character a log may carry (from a model, a tool, a
 * file) is shown as `\u001b` and the like instead of reaching the terminal, so no log can
 * retitle the window, move the cursor or hide lines. Tabs and newlines stay.
 */
export const terminal = (text: string): string => text.replace(unsafe, escape)

/**
 * A JSON line safe for a terminal: `JSON.stringify` already escapes C0 controls; this escapes
 * the rest (DEL, C1, bidi and line separators) as `\uXXXX`, which decodes to the same value.
 */
export const jsonLine = (json: string): string => json.replace(unsafe, escape)

/** Characters of one field shown in full views (`inspect --step`); the rest is counted. */
export const fieldLimit = 16_000

/** `text`, at most `max` characters, saying how much was left out. */
export const cap = (text: string, max = fieldLimit): string =>
  text.length <= max ? text : `${text.slice(0, max)}… (${text.length - max} more characters; rx events prints the whole event)`

const oneLine = (text: string, max: number): string => {
  // Only the start matters: a 5 MB value is not flattened whole.
  const head = text.length > max * 4 ? text.slice(0, max * 4) : text
  const flat = head.replace(/\s+/g, " ").trim()
  return flat.length <= max && head === text ? flat : `${flat.slice(0, max - 1)}…`
}

const json = (value: unknown): string => JSON.stringify(value) ?? "null"

const pad = (text: string, width: number) => text.padEnd(width)

/** The line a step prints in live output, or nothing for events that are not steps. */
export const stepLine = (event: Event.Event, started: ReadonlyMap<string, Event.Of<"ToolStarted">>): string | undefined => {
  switch (event._tag) {
    case "ToolSucceeded":
    case "ToolFailed": {
      const input = started.get(event.callId)?.input
      const head = `${String(event.iteration).padStart(4)}  ${pad(oneLine(event.tool, 40), 12)} ${pad(oneLine(json(input), 48), 48)}`
      const result = event._tag === "ToolSucceeded"
        ? "ok"
        : `${event.error.kind === "recoverable" ? "error" : event.error.kind}: ${oneLine(event.error.message, 60)}`
      return `${head}  ${pad(result, 8)} ${event.durationMs} ms`
    }
    case "ActionRejected":
      return `${String(event.iteration).padStart(4)}  ${pad("(rejected)", 12)} ${event.kind}: ${oneLine(event.reason, 80)}`
    case "ModelFailed":
      return `${String(event.iteration).padStart(4)}  ${pad("(model)", 12)} failed: ${oneLine(event.message, 100)}`
    case "CancelRequested":
      return `      cancel requested: ${oneLine(event.reason, 100)}`
    default:
      return undefined
  }
}

/** The closing line of a run. */
export const endLine = (
  result: { readonly status?: "terminated" | "suspended"; readonly reason: string; readonly detail: string; readonly iterations: number; readonly goalId: string },
  exitCode: number
) =>
  `${result.status === "suspended" ? `suspended (${result.reason}), open,` : result.reason} after ${result.iterations} iteration${result.iterations === 1 ? "" : "s"} (goal ${result.goalId}, exit ${exitCode}): ${oneLine(result.detail, 2_000)}`

/** The first line of a run: the goal and the settings it runs with. */
export const goalLine = (event: Event.Of<"GoalSubmitted">, m: { readonly model?: string | undefined; readonly baseUrl?: string | undefined; readonly workspace?: string | undefined; readonly sandbox?: string | undefined }) =>
  `goal ${event.goalId}: ${oneLine(event.goal, 2_000)}\n  model ${oneLine(m.model ?? "?", 200)} at ${oneLine(m.baseUrl ?? "?", 200)}, workspace ${oneLine(m.workspace ?? "?", 500)}, sandbox ${m.sandbox ?? "auto"}`

const show = (value: unknown) => oneLine(typeof value === "string" ? value : json(value), 200)

/**
 * What changed between two options, one `name value (was old)` per field: the limits, and each
 * setting the transport recorded in `metadata` (workspace, sandbox, model, ...).
 */
export const optionsDiff = (before: Options.Options, after: Options.Options): string => {
  const { metadata: beforeMeta, ...beforeLimits } = before
  const { metadata: afterMeta, ...afterLimits } = after
  const changes = (a: Readonly<Record<string, unknown>>, b: Readonly<Record<string, unknown>>) =>
    [...new Set([...Object.keys(a), ...Object.keys(b)])].flatMap((key) =>
      json(a[key]) === json(b[key]) ? [] : [`${key} ${b[key] === undefined ? "(unset)" : show(b[key])} (was ${a[key] === undefined ? "unset" : show(a[key])})`]
    )
  const all = [...changes(beforeLimits, afterLimits), ...changes(beforeMeta, afterMeta)]
  return all.length === 0 ? "nothing" : all.join(", ")
}

/** Each `OptionsChanged` of a log, with what it changed from the options before it. */
export const optionsChanges = (events: ReadonlyArray<Event.Event>): ReadonlyArray<string> => {
  const submitted = events[0]
  if (submitted?._tag !== "GoalSubmitted") return []
  let current = submitted.options
  const lines: Array<string> = []
  for (const e of events) {
    if (e._tag !== "OptionsChanged") continue
    lines.push(`seq ${e.seq} (${date(e.at)}, after iteration ${e.iteration}): ${optionsDiff(current, e.options)}`)
    current = e.options
  }
  return lines
}

const date = (at: number) => new Date(at).toISOString()

/** `rx list`: one line per goal. */
export const listLine = (g: GoalSummary.GoalSummary) =>
  `${pad(g.goalId, 18)} ${pad(g.status === "terminated" ? (g.reason ?? "terminated") : "open", 17)} ${String(g.iterations).padStart(5)} it  ${date(g.submittedAt)}  ${g.status === "terminated" ? date(g.updatedAt) : "-".padEnd(24)}  ${oneLine(g.goal, 60)}`

export const listHeader = `${pad("GOAL", 18)} ${pad("STATUS", 17)} ${pad("ITER", 8)} ${pad("STARTED", 24)}  ${pad("ENDED", 24)}  TEXT`

/** One iteration of a log, gathered for `inspect`. */
export interface Step {
  readonly iteration: number
  readonly events: ReadonlyArray<Event.Event>
}

export const steps = (events: ReadonlyArray<Event.Event>): ReadonlyArray<Step> => {
  const byIteration = new Map<number, Array<Event.Event>>()
  for (const event of events) {
    if (event.iteration === 0) continue
    const list = byIteration.get(event.iteration) ?? []
    list.push(event)
    byIteration.set(event.iteration, list)
  }
  return [...byIteration.entries()].map(([iteration, list]) => ({ iteration, events: list }))
}

/** A step in full: decision, tool, input, output or error, state summary. */
export const step = (s: Step, width: number): ReadonlyArray<string> => {
  const lines: Array<string> = [`step ${s.iteration}`]
  const cut = (text: string) => (width === Infinity ? cap(text) : oneLine(text, width))
  for (const e of s.events) {
    switch (e._tag) {
      case "ModelResponded": {
        const call = e.response.toolCalls[0]
        const decision = call !== undefined ? `${call.name} ${call.arguments}` : e.response.text
        lines.push(`  model     ${cut(decision)}${e.response.finishReason === "length" ? " (cut off)" : ""}`)
        if (call !== undefined && e.response.text.trim() !== "") lines.push(`  thought   ${cut(e.response.text)}`)
        lines.push(`  usage     ${e.response.usage.inputTokens} in, ${e.response.usage.outputTokens} out`)
        break
      }
      case "ModelFailed":
        lines.push(`  model     failed: ${cut(e.message)}`)
        break
      case "ActionRejected":
        lines.push(`  rejected  ${e.kind}: ${cut(e.reason)}`)
        break
      case "ToolStarted":
        lines.push(`  tool      ${oneLine(e.tool, 80)} (call ${oneLine(e.callId, 80)})`, `  input     ${cut(json(e.input))}`)
        break
      case "ToolSucceeded":
        lines.push(`  output    ${cut(json(e.output))}`, `  duration  ${e.durationMs} ms`)
        break
      case "ToolFailed":
        lines.push(`  error     ${e.error.kind}: ${cut(e.error.message)}`, `  duration  ${e.durationMs} ms`)
        break
      case "IterationCompleted": {
        const m = e.summary
        lines.push(`  state     ${m.toolCalls} calls, ${m.consecutiveFailures} failures in a row, ${m.consecutiveMalformed} rejected in a row, ${m.idleIterations} idle, repeats ${m.repeats}`)
        break
      }
      case "CancelRequested":
        lines.push(`  cancel    ${cut(e.reason)}`)
        break
      case "OptionsChanged":
        lines.push(`  options   changed (seq ${e.seq})`)
        break
      case "Terminated":
        lines.push(`  end       ${e.reason}: ${cut(e.detail)}`)
        break
      case "GoalSubmitted":
        break
    }
  }
  return lines
}

/** Why the run stopped, the limit involved, and the events that led there. */
export const audit = (events: ReadonlyArray<Event.Event>): ReadonlyArray<string> => {
  const end = events.findLast((e): e is Event.Of<"Terminated"> => e._tag === "Terminated")
  const submitted = events[0]
  if (end === undefined || submitted?._tag !== "GoalSubmitted") return ["not terminated: the goal is open (rx resume <id> continues it)"]
  const o = submitted.options
  const last = <T extends Event.Event["_tag"]>(tag: T, n: number) =>
    events.filter((e): e is Event.Of<T> => e._tag === tag).slice(-n)
  const describe = (e: Event.Event) => {
    switch (e._tag) {
      case "ToolFailed": return `seq ${e.seq}: ${e.tool} failed (${e.error.kind}): ${oneLine(e.error.message, 80)}`
      case "ToolSucceeded": return `seq ${e.seq}: ${e.tool} succeeded: ${oneLine(json(e.output), 80)}`
      case "ActionRejected": return `seq ${e.seq}: answer rejected (${e.kind}): ${oneLine(e.reason, 80)}`
      case "ModelResponded": return `seq ${e.seq}: model answered ${oneLine(e.response.toolCalls[0]?.arguments ?? e.response.text, 80)}`
      case "CancelRequested": return `seq ${e.seq}: cancel requested: ${oneLine(e.reason, 80)}`
      default: return `seq ${e.seq}: ${e._tag}`
    }
  }
  const evidence: ReadonlyArray<Event.Event> = (() => {
    switch (end.reason) {
      case "done": return last("ModelResponded", 1)
      case "max_iterations": return last("IterationCompleted", 1)
      case "fatal_error": return [...last("ModelFailed", 1), ...last("ToolFailed", 1)].slice(-1)
      case "repeated_failure": return last("ToolFailed", o.maxConsecutiveFailures)
      case "malformed_output": return last("ActionRejected", o.maxMalformed)
      case "no_progress": return events.filter((e) => e._tag === "ToolSucceeded" || e._tag === "ToolFailed" || e._tag === "ActionRejected").slice(-Math.max(o.maxRepeats, 3))
      case "cancelled": return last("CancelRequested", 1)
      case "token_budget": return last("ModelResponded", 1)
    }
  })()
  const limit: Record<Event.Reason, string> = {
    done: "the model called done",
    max_iterations: `maxIterations = ${o.maxIterations}`,
    fatal_error: "a fatal error ends a run at once",
    repeated_failure: `maxConsecutiveFailures = ${o.maxConsecutiveFailures}`,
    malformed_output: `maxMalformed = ${o.maxMalformed}`,
    no_progress: `maxRepeats = ${o.maxRepeats}, noProgressWindow = ${o.noProgressWindow}`,
    cancelled: "a cancel request",
    token_budget: `maxTotalTokens = ${o.maxTotalTokens ?? "unlimited"}`
  }
  return [
    `reason    ${end.reason} (seq ${end.seq}, ${date(end.at)})`,
    `detail    ${oneLine(end.detail, 2_000)}`,
    `limit     ${limit[end.reason]}`,
    "led there",
    ...evidence.map((e) => `  ${describe(e)}`)
  ]
}

/** `rx inspect`: the goal, every step, the tool trace, the termination audit. */
export const inspect = (events: ReadonlyArray<Event.Event>, only: number | undefined): ReadonlyArray<string> => {
  const submitted = events[0]
  if (submitted?._tag !== "GoalSubmitted") return ["this log does not start with GoalSubmitted"]
  const state = State.fromEvents(submitted.goalId, events)
  const all = steps(events)
  if (only !== undefined) {
    const s = all.find((x) => x.iteration === only)
    return s === undefined ? [`goal ${submitted.goalId} has no step ${only} (steps 1 to ${all.length})`] : step(s, Infinity)
  }
  const o = submitted.options
  const metadata = Object.entries(o.metadata).map(([k, v]) => `${oneLine(k, 40)}=${show(v)}`).join(", ")
  const changes = optionsChanges(events)
  const inputs = new Map(events.flatMap((e) => (e._tag === "ToolStarted" ? [[e.callId, e.input] as const] : [])))
  const trace = events.filter((e): e is Event.Of<"ToolSucceeded"> | Event.Of<"ToolFailed"> => e._tag === "ToolSucceeded" || e._tag === "ToolFailed")
  return [
    `goal      ${submitted.goalId}`,
    `text      ${cap(submitted.goal, 4_000)}`,
    `submitted ${date(submitted.at)}`,
    `status    ${state.terminated === null ? "open" : `terminated (${state.terminated.reason})`}, ${state.completed} iterations, ${events.length} events`,
    `limits    maxIterations ${o.maxIterations}, maxConsecutiveFailures ${o.maxConsecutiveFailures}, maxMalformed ${o.maxMalformed}, maxRepeats ${o.maxRepeats}, noProgressWindow ${o.noProgressWindow}, promptBudget ${o.promptBudget}`,
    ...(metadata === "" ? [] : [`settings  ${metadata}`]),
    ...changes.map((c, i) => `${i === 0 ? "changed  " : "         "} ${c}`),
    `tools     ${oneLine(submitted.tools.map((t) => t.name).join(", "), 2_000)}`,
    `usage     ${state.usage.inputTokens} tokens in, ${state.usage.outputTokens} out`,
    "",
    ...all.flatMap((s) => [...step(s, 120), ""]),
    "tool trace",
    ...trace.map((e) => {
      const result = e._tag === "ToolSucceeded" ? "ok" : e.error.kind
      return `  ${String(e.iteration).padStart(4)}  ${pad(oneLine(e.tool, 40), 12)} ${pad(result, 11)} ${String(e.durationMs).padStart(6)} ms  ${oneLine(json(inputs.get(e.callId)), 60)}`
    }),
    "",
    "termination",
    ...audit(events).map((l) => `  ${l}`)
  ]
}

/** `rx doctor`: what was checked, each finding, and the verdict. */
export const doctor = (report: Doctor.Report, unhealthyCode: number): string => {
  const problems = report.findings.filter((f) => f.severity === "problem")
  const warnings = report.findings.filter((f) => f.severity === "warning")
  const plural = (n: number, what: string) => `${n} ${what}${n === 1 ? "" : "s"}`
  return [
    `rx doctor: ${report.filename}`,
    ...(report.opened ? [`  ${plural(report.goals, "goal")}, ${plural(report.events, "event")} checked`] : []),
    ...report.findings.map((f) => `  ${pad(f.severity, 8)} ${pad(f.check, 10)} ${oneLine(f.message, 1_000)}`),
    problems.length === 0
      ? `healthy${warnings.length === 0 ? "" : ` (${plural(warnings.length, "warning")})`}`
      : `NOT healthy: ${plural(problems.length, "problem")}${warnings.length === 0 ? "" : `, ${plural(warnings.length, "warning")}`} (exit ${unhealthyCode}). rx never repairs a log: restore the database from a backup, or keep it aside and start a new one with --db`
  ].join("\n")
}
