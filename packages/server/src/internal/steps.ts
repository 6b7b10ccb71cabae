/**
 * The projection of `View`: a log's events to its steps. Pure and free of runtime imports, so the
 * web inspector bundles it and draws the steps from the events it follows, as `rx inspect` does.
 */
import type { Event } from "@rx/kernel"
import type { Change, Entry, Step } from "./entries.js"

/** The last line of `text` that is not blank, trimmed. */
const lastLine = (text: string): string => text.split("\n").map((line) => line.trim()).filter((line) => line !== "").at(-1) ?? ""

/**
 * How a command ended when it did not end well, read from a tool's output that says it (the
 * shell's `exit_code`, `signal`, `timed_out`, `stderr`): `exit 3` (or `signal SIGKILL`,
 * `timed out`) and the last line of its stderr. Nothing for a command that exited 0 or an output
 * of another shape: a non-zero exit is a result the tool reports, not a tool failure, so the call
 * is `ok` in the log's terms, yet a person reading the step wants to see it failed.
 */
export const commandFailure = (output: unknown): { readonly status: string; readonly stderr: string } | undefined => {
  if (output === null || typeof output !== "object" || !("exit_code" in output)) return undefined
  const o = output as { readonly exit_code?: unknown; readonly signal?: unknown; readonly timed_out?: unknown; readonly stderr?: unknown }
  const stderr = typeof o.stderr === "string" ? lastLine(o.stderr.length > 64_000 ? o.stderr.slice(-64_000) : o.stderr) : ""
  if (o.timed_out === true) return { status: "timed out", stderr }
  if (typeof o.signal === "string" && o.signal !== "") return { status: `signal ${o.signal.slice(0, 20)}`, stderr }
  if (typeof o.exit_code === "number" && o.exit_code !== 0) return { status: `exit ${o.exit_code}`, stderr }
  return undefined
}

const json = (value: unknown): string => JSON.stringify(value) ?? "null"

/** What changed between two options: each limit, then each recorded setting, whose value differs. */
export const changes = (before: Event.Of<"GoalSubmitted">["options"], after: Event.Of<"GoalSubmitted">["options"]): ReadonlyArray<Change> => {
  const { metadata: _before, settings: beforeSettings = {}, ...beforeLimits } = before
  const { metadata: _after, settings: afterSettings = {}, ...afterLimits } = after
  const differ = (a: Readonly<Record<string, unknown>>, b: Readonly<Record<string, unknown>>) =>
    [...new Set([...Object.keys(a), ...Object.keys(b)])].flatMap((name): ReadonlyArray<Change> =>
      json(a[name]) === json(b[name]) ? [] : [{ name, ...(b[name] === undefined ? {} : { value: b[name] }), ...(a[name] === undefined ? {} : { was: a[name] }) }]
    )
  return [...differ(beforeLimits, afterLimits), ...differ(beforeSettings, afterSettings)]
}

/** A call's outcome from the event that ended it. */
const outcome = (e: Event.Of<"ToolSucceeded"> | Event.Of<"ToolFailed">) => {
  if (e._tag === "ToolFailed") {
    // Cut short by rx stopping: the recorded duration spans rx's downtime, so it is not the call's.
    const error = { kind: e.error.kind, message: e.error.message }
    return e.error.kind === "unknown"
      ? { outcome: e.error.kind, endSeq: e.seq, error, durationMs: null, spanMs: e.durationMs }
      : { outcome: e.error.kind, endSeq: e.seq, error, durationMs: e.durationMs }
  }
  const failed = commandFailure(e.output)
  return {
    outcome: failed === undefined ? "ok" : "command failed",
    endSeq: e.seq,
    output: e.output,
    durationMs: e.durationMs,
    ...(failed === undefined ? {} : { failed: failed.status, stderrLastLine: failed.stderr })
  }
}

type Mutable<T> = { -readonly [K in keyof T]: T[K] }
type CallEntry = Mutable<Extract<Entry, { readonly _tag: "Call" }>>

/** The entry an event adds to its step; nothing for one that only completes a call, or opens the log. */
const entry = (e: Event.Event, options: Event.Of<"GoalSubmitted">["options"] | undefined, calls: Map<string, CallEntry>): Entry | undefined => {
  const optional = <K extends string, V>(key: K, value: V | undefined) => (value === undefined ? {} : { [key]: value } as { [P in K]: V })
  switch (e._tag) {
    case "ModelResponded":
      return {
        _tag: e._tag,
        seq: e.seq,
        text: e.response.text,
        calls: e.response.toolCalls.map((c) => ({ name: c.name, arguments: c.arguments })),
        usage: { inputTokens: e.response.usage.inputTokens, outputTokens: e.response.usage.outputTokens },
        ...optional("finishReason", e.response.finishReason)
      }
    case "ModelFailed":
      return { _tag: e._tag, seq: e.seq, message: e.message }
    case "ActionRejected":
      return { _tag: e._tag, seq: e.seq, kind: e.kind, reason: e.reason, ...optional("index", e.index), ...optional("tool", e.tool), raw: e.raw }
    case "ToolStarted": {
      const call: CallEntry = { _tag: "Call", seq: e.seq, callId: e.callId, tool: e.tool, ...optional("index", e.index), input: e.input, outcome: "running" }
      calls.set(e.callId, call)
      return call
    }
    case "ToolSucceeded":
    case "ToolFailed": {
      const started = calls.get(e.callId)
      // An outcome whose start is not in these events, or whose start has one already, is a call of its own: no event is dropped.
      if (started === undefined || started.endSeq !== undefined) return { _tag: "Call", seq: e.seq, callId: e.callId, tool: e.tool, input: null, ...outcome(e) }
      Object.assign(started, outcome(e))
      return undefined
    }
    case "ApprovalRequested":
      return { _tag: e._tag, seq: e.seq, at: e.at, callId: e.callId, tool: e.tool, ...optional("index", e.index), input: e.input }
    case "ApprovalDecided":
      return { _tag: e._tag, seq: e.seq, at: e.at, callId: e.callId, approved: e.approved, reason: e.reason, by: e.by }
    case "Suspended":
      return { _tag: e._tag, seq: e.seq, at: e.at, reason: e.reason, detail: e.detail, ...optional("child", e.child) }
    case "CancelRequested":
      return { _tag: e._tag, seq: e.seq, reason: e.reason }
    case "OptionsChanged":
      return { _tag: e._tag, seq: e.seq, at: e.at, changes: options === undefined ? [] : changes(options, e.options) }
    case "Terminated":
      return { _tag: e._tag, seq: e.seq, reason: e.reason, detail: e.detail }
    case "MessageSent":
      return { _tag: e._tag, seq: e.seq, at: e.at, by: e.by, text: e.text }
    case "TurnsSummarised":
      return {
        _tag: e._tag,
        seq: e.seq,
        from: e.from,
        to: e.to,
        text: e.text,
        usage: { inputTokens: e.usage.inputTokens, outputTokens: e.usage.outputTokens },
        ...optional("cut", e.cut),
        ...optional("failed", e.failed)
      }
    case "IterationCompleted": {
      const { consecutiveFailures, consecutiveMalformed, idleIterations, repeats, toolCalls } = e.summary
      return { _tag: e._tag, seq: e.seq, toolCalls, consecutiveFailures, consecutiveMalformed, idleIterations, repeats }
    }
    case "GoalSubmitted":
      return undefined
  }
}

/**
 * A log's steps, in order: each iteration's entries as they were recorded, and each summary of
 * earlier steps as a step of its own. What happened before the first step (iteration 0: the
 * submission, a cancel or a change of options before it ran) is not a step.
 */
export const steps = (events: ReadonlyArray<Event.Event>): ReadonlyArray<Step> => {
  const byIteration = new Map<number, Array<Entry>>()
  const all: Array<Step> = []
  const calls = new Map<string, CallEntry>()
  let options = events[0]?._tag === "GoalSubmitted" ? events[0].options : undefined
  for (const e of events) {
    const made = entry(e, options, calls)
    if (e._tag === "OptionsChanged") options = e.options
    if (e.iteration === 0 || made === undefined) continue
    if (made._tag === "TurnsSummarised") {
      all.push({ step: e.iteration, summary: true, entries: [made] })
      continue
    }
    const list = byIteration.get(e.iteration)
    if (list !== undefined) {
      list.push(made)
      continue
    }
    const fresh = [made]
    byIteration.set(e.iteration, fresh)
    all.push({ step: e.iteration, entries: fresh })
  }
  return all
}
