/**
 * What `rx` prints: one line per step while a goal runs, and the views of `inspect` and
 * `list`. Pure functions of events, so the same log always prints the same way.
 */
import { Event, GoalSummary, State } from "@rx/kernel"

const oneLine = (text: string, max: number): string => {
  const flat = text.replace(/\s+/g, " ").trim()
  return flat.length <= max ? flat : `${flat.slice(0, max - 1)}…`
}

const json = (value: unknown): string => JSON.stringify(value) ?? "null"

const pad = (text: string, width: number) => text.padEnd(width)

/** The line a step prints in live output, or nothing for events that are not steps. */
export const stepLine = (event: Event.Event, started: ReadonlyMap<string, Event.Of<"ToolStarted">>): string | undefined => {
  switch (event._tag) {
    case "ToolSucceeded":
    case "ToolFailed": {
      const input = started.get(event.callId)?.input
      const head = `${String(event.iteration).padStart(4)}  ${pad(event.tool, 12)} ${pad(oneLine(json(input), 48), 48)}`
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
      return `      cancel requested: ${event.reason}`
    default:
      return undefined
  }
}

/** The closing line of a run. */
export const endLine = (result: { readonly reason: Event.Reason; readonly detail: string; readonly iterations: number; readonly goalId: string }, exitCode: number) =>
  `${result.reason} after ${result.iterations} iteration${result.iterations === 1 ? "" : "s"} (goal ${result.goalId}, exit ${exitCode}): ${result.detail}`

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
  const cut = (text: string) => (width === Infinity ? text : oneLine(text, width))
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
        lines.push(`  model     failed: ${e.message}`)
        break
      case "ActionRejected":
        lines.push(`  rejected  ${e.kind}: ${e.reason}`)
        break
      case "ToolStarted":
        lines.push(`  tool      ${e.tool} (call ${e.callId})`, `  input     ${cut(json(e.input))}`)
        break
      case "ToolSucceeded":
        lines.push(`  output    ${cut(json(e.output))}`, `  duration  ${e.durationMs} ms`)
        break
      case "ToolFailed":
        lines.push(`  error     ${e.error.kind}: ${e.error.message}`, `  duration  ${e.durationMs} ms`)
        break
      case "IterationCompleted": {
        const m = e.summary
        lines.push(`  state     ${m.toolCalls} calls, ${m.consecutiveFailures} failures in a row, ${m.consecutiveMalformed} rejected in a row, ${m.idleIterations} idle, repeats ${m.repeats}`)
        break
      }
      case "CancelRequested":
        lines.push(`  cancel    ${e.reason}`)
        break
      case "Terminated":
        lines.push(`  end       ${e.reason}: ${e.detail}`)
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
    }
  })()
  const limit: Record<Event.Reason, string> = {
    done: "the model called done",
    max_iterations: `maxIterations = ${o.maxIterations}`,
    fatal_error: "a fatal error ends a run at once",
    repeated_failure: `maxConsecutiveFailures = ${o.maxConsecutiveFailures}`,
    malformed_output: `maxMalformed = ${o.maxMalformed}`,
    no_progress: `maxRepeats = ${o.maxRepeats}, noProgressWindow = ${o.noProgressWindow}`,
    cancelled: "a cancel request"
  }
  return [
    `reason    ${end.reason} (seq ${end.seq}, ${date(end.at)})`,
    `detail    ${end.detail}`,
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
  const metadata = Object.entries(o.metadata).map(([k, v]) => `${k}=${typeof v === "string" ? v : json(v)}`).join(", ")
  const inputs = new Map(events.flatMap((e) => (e._tag === "ToolStarted" ? [[e.callId, e.input] as const] : [])))
  const trace = events.filter((e): e is Event.Of<"ToolSucceeded"> | Event.Of<"ToolFailed"> => e._tag === "ToolSucceeded" || e._tag === "ToolFailed")
  return [
    `goal      ${submitted.goalId}`,
    `text      ${submitted.goal}`,
    `submitted ${date(submitted.at)}`,
    `status    ${state.terminated === null ? "open" : `terminated (${state.terminated.reason})`}, ${state.completed} iterations, ${events.length} events`,
    `limits    maxIterations ${o.maxIterations}, maxConsecutiveFailures ${o.maxConsecutiveFailures}, maxMalformed ${o.maxMalformed}, maxRepeats ${o.maxRepeats}, noProgressWindow ${o.noProgressWindow}, promptBudget ${o.promptBudget}`,
    ...(metadata === "" ? [] : [`settings  ${metadata}`]),
    `tools     ${submitted.tools.map((t) => t.name).join(", ")}`,
    `usage     ${state.usage.inputTokens} tokens in, ${state.usage.outputTokens} out`,
    "",
    ...all.flatMap((s) => [...step(s, 120), ""]),
    "tool trace",
    ...trace.map((e) => {
      const result = e._tag === "ToolSucceeded" ? "ok" : e.error.kind
      return `  ${String(e.iteration).padStart(4)}  ${pad(e.tool, 12)} ${pad(result, 11)} ${String(e.durationMs).padStart(6)} ms  ${oneLine(json(inputs.get(e.callId)), 60)}`
    }),
    "",
    "termination",
    ...audit(events).map((l) => `  ${l}`)
  ]
}
