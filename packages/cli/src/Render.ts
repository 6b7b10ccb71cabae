/**
 * What `rx` prints: one line per step while a goal runs, and the views of `inspect` and
 * `list`. Pure functions of events, so the same log always prints the same way.
 */
import { type Event, GoalSummary, type Options, type State } from "@rx/kernel"
import { Schema } from "effect"
import type { Doctor } from "@rx/store-sqlite"
import * as Notes from "@rx/host/Notes"
import * as Settings from "@rx/host/Settings"
import * as View from "@rx/server/View"

const { redactUserinfo } = Settings

/** Text for the terminal, and a JSON line for it: control characters escaped (`Notes`). */
export const { jsonLine, terminal } = Notes

/** Characters of one field shown in full views (`inspect --step`); the rest is counted. */
export const fieldLimit = 16_000

/** `text`, at most `max` characters, saying how much was left out. */
export const cap = (text: string, max = fieldLimit): string =>
  text.length <= max ? text : `${text.slice(0, max)}… (${text.length - max} more characters; rx events prints the whole event)`

const { decision, oneLine } = View

const json = (value: unknown): string => JSON.stringify(value) ?? "null"

/** Characters of a call shown where a person decides on it; a longer call names the command that shows it whole. */
export const decisionLimit = fieldLimit

/** An input field's name as shown: as it is when plain, else as a JSON string. */
const fieldName = (key: string) => (/^[\w.-]{1,80}$/.test(key) ? key : json(key))

/** Where the text of a field spanning lines is shown: behind a gutter, so none of its lines can pass for rx's own. */
const gutter = "    │ "

/**
 * A call as a person reads it to decide on it: the tool, then each field of its input, a text of
 * several lines as those lines, any other value as JSON, escaped for the terminal. Whole when it
 * fits in `max` characters; otherwise its first and last lines, and between them a line saying
 * exactly how many characters are not shown and the command (`whole`) that shows all of it.
 */
export const callView = (tool: string, input: unknown, whole: string, max = decisionLimit): ReadonlyArray<string> => {
  const lines = [`${oneLine(tool, 200)}, with this input:`]
  if (input !== null && typeof input === "object" && !Array.isArray(input)) {
    const entries = Object.entries(input)
    if (entries.length === 0) lines.push("  (none)")
    for (const [key, value] of entries) {
      if (typeof value === "string" && value.includes("\n")) {
        const text = value.split("\n")
        lines.push(`  ${fieldName(key)} (${text.length} lines, ${value.length} characters):`)
        for (const line of text) lines.push(`${gutter}${line}`)
      } else {
        lines.push(`  ${fieldName(key)}: ${json(value)}`)
      }
    }
  } else {
    lines.push(`  ${json(input)}`)
  }
  return clipLines(lines.map(terminal), max, whole)
}

/**
 * `lines` within `max` characters: all of them, or the first ones (the last of those cut if
 * need be) and the last whole ones, with a line between saying how much was left out and where
 * to see it.
 */
const clipLines = (lines: ReadonlyArray<string>, max: number, whole: string): ReadonlyArray<string> => {
  const size = (line: string) => line.length + 1
  const total = lines.reduce((n, line) => n + size(line), 0)
  if (total <= max) return lines
  const tail: Array<string> = []
  let tailRoom = Math.floor(max * 0.4)
  for (let i = lines.length - 1; i > 0; i--) {
    const line = lines[i] as string
    if (size(line) > tailRoom) break
    tail.unshift(line)
    tailRoom -= size(line)
  }
  const head: Array<string> = []
  let headRoom = max - Math.floor(max * 0.4) + tailRoom
  for (let i = 0; i < lines.length - tail.length && headRoom > 0; i++) {
    const line = lines[i] as string
    head.push(size(line) <= headRoom ? line : line.slice(0, headRoom))
    headRoom -= size(line)
  }
  const shown = head.reduce((n, line) => n + line.length, 0) + tail.reduce((n, line) => n + line.length, 0)
  const hidden = lines.reduce((n, line) => n + line.length, 0) - shown
  const skipped = lines.length - tail.length - head.length + (head.length > 0 && (head[head.length - 1] as string).length < (lines[head.length - 1] as string).length ? 1 : 0)
  return [...head, `  … ${hidden} more characters (in ${skipped} line${skipped === 1 ? "" : "s"}) of this call are not shown here; ${whole} shows all of it …`, ...tail]
}

/** `text` on one line within `max` characters; when cut, how long it is and the command that shows it whole. */
const oneLineOr = (text: string, max: number, whole: string) => {
  const head = text.length > max * 4 ? text.slice(0, max * 4) : text
  const flat = head.replace(/\s+/g, " ").trim()
  return flat.length <= max && head === text ? flat : `${flat.slice(0, max - 1)}… (${text.length} characters in all; ${whole} shows them)`
}

const pad = (text: string, width: number) => text.padEnd(width)

/** `n thing` or `n things`. */
export const plural = (n: number, thing: string, things = `${thing}s`) => `${n} ${n === 1 ? thing : things}`

/** A duration as recorded, unless rx stopped during the call: then how long it ran is not known (the record spans rx's downtime). */
const duration = (e: Event.Of<"ToolSucceeded"> | Event.Of<"ToolFailed">) =>
  e._tag === "ToolFailed" && e.error.kind === "unknown" ? "cut short" : `${e.durationMs} ms`

/** The line a step prints in live output, or nothing for events that are not steps. */
export const stepLine = (
  event: Event.Event,
  started: ReadonlyMap<string, { readonly input: unknown }>,
  /** The text the line before said in full (a model failure's): a suspension for that reason does not repeat it. */
  said?: string
): string | undefined => {
  switch (event._tag) {
    case "ToolSucceeded":
    case "ToolFailed": {
      const call = started.get(event.callId)
      // A call started before this output began, whose input it did not see: said so, never as `null`.
      const input = call === undefined ? `(call ${oneLine(event.callId, 36)})` : json(call.input)
      const head = `${String(event.iteration).padStart(4)}  ${pad(oneLine(event.tool, 40), 12)} ${pad(oneLine(input, 48), 48)}`
      if (event._tag === "ToolFailed") {
        const result = `${event.error.kind === "recoverable" ? "error" : event.error.kind}: ${oneLine(event.error.message, 60)}`
        return `${head}  ${pad(result, 8)} ${duration(event)}`
      }
      const failed = View.commandFailure(event.output)
      if (failed === undefined) return `${head}  ${pad("ok", 8)} ${event.durationMs} ms`
      return `${head}  ${pad(failed.status, 8)} ${event.durationMs} ms${failed.stderr === "" ? "" : `  stderr: ${oneLine(failed.stderr, 100)}`}`
    }
    case "ActionRejected":
      return `${String(event.iteration).padStart(4)}  ${pad("(rejected)", 12)} ${whichCall(event)}${event.kind}: ${oneLine(event.reason, 80)}`
    case "ApprovalRequested":
      return `${String(event.iteration).padStart(4)}  ${pad(oneLine(event.tool, 40), 12)} ${pad(oneLine(json(event.input), 48), 48)}  waits for approval (call ${oneLine(event.callId, 80)})`
    case "ApprovalDecided":
      return `      ${decision(event)} (call ${oneLine(event.callId, 80)})`
    case "Suspended":
      return `      suspended (${event.reason})${said === event.detail ? "" : `: ${oneLine(event.detail, 100)}`}`
    case "ModelResponded":
      return thought(event)
    case "ModelFailed":
      return `${String(event.iteration).padStart(4)}  ${pad("(model)", 12)} failed: ${oneLine(event.message, 400)}`
    case "CancelRequested":
      return `      cancel requested: ${oneLine(event.reason, 100)}`
    case "TurnsSummarised":
      return `      ${summaryLine(event)}`
    case "MessageSent":
      return `      message from ${oneLine(event.by, 80)}: ${oneLine(event.text, 100)}`
    default:
      return undefined
  }
}

/**
 * A sub-goal's event in the live output of the goal that delegated it: each of its steps as
 * `stepLine` says it, under the sub-goal's id, and its start and end.
 */
export const subGoalLine = (event: Event.Event, started: ReadonlyMap<string, { readonly input: unknown }>): string | undefined => {
  const id = `  ${oneLine(event.goalId, 80)} `
  switch (event._tag) {
    case "GoalSubmitted":
      return `${id}sub-goal${event.parent === undefined ? "" : ` of ${oneLine(event.parent.goalId, 80)} (call ${oneLine(event.parent.callId, 80)})`}: ${oneLine(event.goal, 200)}`
    case "Terminated":
      return `${id}ended ${event.reason}: ${oneLine(event.detail, 200)}`
    default: {
      const line = stepLine(event, started)
      return line === undefined ? undefined : `${id}${line.trimStart()}`
    }
  }
}

/** Characters of a thought shown. */
export const thoughtChars = 200

/**
 * The thought a model gave with its calls, as a step line (`   3  thought      ...`): one line,
 * its first `thoughtChars` characters, escaped. Nothing for other events, an answer without
 * calls (its text is the final answer, printed at the end) or an empty text.
 */
export const thought = (event: Event.Event): string | undefined => {
  if (event._tag !== "ModelResponded" || event.response.toolCalls.length === 0) return undefined
  const text = oneLine(event.response.text, thoughtChars)
  return text === "" ? undefined : `${String(event.iteration).padStart(4)}  ${pad("thought", 12)} ${terminal(text)}`
}

/** Which call of an answer a rejection is about, when it is about one: `index 1, read_file: `. */
const whichCall = (event: { readonly index?: number | undefined; readonly tool?: string | undefined }) =>
  event.index === undefined ? "" : `index ${event.index}${event.tool === undefined ? "" : `, ${oneLine(event.tool, 40)}`}: `

/** Where the next commands find the goal: a `--db` to repeat, or (`server`) the `--server` it runs on. */
export type Where = { readonly db: string } | { readonly server: string } | undefined

/**
 * What to do about a goal that waits, or nothing: for a call awaiting approval, the commands that
 * decide it and continue (a server goes on by itself once it is decided); otherwise how to
 * continue it.
 */
export const nextSteps = (result: { readonly status: "terminated" | "suspended"; readonly reason: string; readonly goalId: string; readonly state: State.State }, where: Where): string | undefined => {
  const id = result.goalId
  const flag = where === undefined ? "" : "db" in where ? ` --db ${shellWord(where.db)}` : ` --server ${shellWord(where.server)}`
  // A goal stopped by a limit goes on as a new goal that starts from what it did.
  if (result.status !== "suspended") {
    return result.reason === "max_iterations" || result.reason === "token_budget"
      ? `rx run --continue ${id}${flag} "<what next>" goes on from where it stopped, as a new goal`
      : undefined
  }
  const awaiting = result.state.awaiting
  const child = result.state.suspended?.child
  if (child !== undefined) {
    // It waits on a sub-goal: what to do is the sub-goal's, then this goal goes on with it.
    const sub = shellWord(child)
    return [
      `goal ${oneLine(id, 200)} waits on its sub-goal ${oneLine(child, 200)} (${result.reason}): rx inspect ${sub}${flag} shows it`,
      ...(result.reason === "awaiting_approval" ? [`  approve: rx approve ${sub}${flag}`, `  deny:    rx deny ${sub} --reason "..."${flag}`] : []),
      where !== undefined && "server" in where ? "  then the server goes on with both" : `  then:    rx resume ${id}${flag} goes on with both`
    ].join("\n")
  }
  if (result.reason === "awaiting_approval" && awaiting !== null && awaiting.decision === null) {
    const [head, ...input] = callView(awaiting.tool, awaiting.input, `rx inspect ${id} --step ${result.state.iteration}${flag}`)
    return [
      `call ${oneLine(awaiting.callId, 200)} waits for approval: ${head ?? ""}`,
      ...input,
      `  approve: rx approve ${id}${flag}`,
      `  deny:    rx deny ${id} --reason "..."${flag}`,
      where !== undefined && "server" in where ? "  then the server goes on with it" : `  then:    rx resume ${id}${flag}`
    ].join("\n")
  }
  // A model file has no server to wait for: what failed is a setting (the message names it) or the machine.
  const inProcess = result.state.options.settings?.modelFile !== undefined
  return result.reason !== "model_unavailable"
    ? `rx resume ${id}${flag} continues it`
    : inProcess
    ? `rx resume ${id}${flag} continues it, with the setting the message names changed (e.g. --context N)`
    : `rx resume ${id}${flag} continues it once the model server answers`
}

/** The flag that names where a goal is, as next commands repeat it: ` --db x`, ` --server url`, or nothing. */
export const whereFlag = (where: Where): string =>
  where === undefined ? "" : "db" in where ? ` --db ${shellWord(where.db)}` : ` --server ${shellWord(where.server)}`

/**
 * What continues a goal once a call of it is decided on a local log: `rx resume` of the goal, or,
 * for a sub-goal, of the goal that delegated it, which goes on with both (as `nextSteps` said).
 */
export const decidedNext = (goalId: string, parent: string | null, approve: boolean, flag: string): string =>
  parent === null
    ? `recorded, nothing run yet: rx resume ${goalId}${flag} ${approve ? "runs it exactly as requested" : "tells the model"}`
    : `recorded, nothing run yet: rx resume ${shellWord(parent)}${flag} goes on with both (sub-goal ${oneLine(goalId, 200)} ${approve ? "runs the call exactly as requested" : "tells its model"})`

/** A path or URL as a shell word, quoted when it needs to be. */
export const shellWord = (text: string) => (/^[\w./:@-]+$/.test(text) ? text : `'${text.replace(/'/g, "'\\''")}'`)

/** The closing line of a run; `said` is a text printed above in full, which the detail does not repeat. */
export const endLine = (
  result: { readonly status?: "terminated" | "suspended"; readonly reason: string; readonly detail: string; readonly iterations: number; readonly goalId: string },
  exitCode: number,
  said?: string
) =>
  `${result.status === "suspended" ? `suspended (${result.reason}), open,` : result.reason} after ${result.iterations} iteration${result.iterations === 1 ? "" : "s"} (goal ${result.goalId}, exit ${exitCode})${said === result.detail ? "" : `: ${oneLine(result.detail, 2_000)}`}`

/** The first line of a run: the goal and the settings it runs with. */
export const goalLine = (
  event: Event.Of<"GoalSubmitted">,
  m: { readonly model?: string | undefined; readonly baseUrl?: string | undefined; readonly modelFile?: string | undefined; readonly workspace?: string | undefined; readonly sandbox?: string | undefined }
) =>
  `goal ${event.goalId}: ${oneLine(event.goal, 2_000)}\n  model ${oneLine(m.model ?? "?", 200)} ${m.modelFile === undefined ? `at ${oneLine(redactUserinfo(m.baseUrl ?? "?"), 200)}` : `in rx, from ${oneLine(m.modelFile, 500)}`}, workspace ${oneLine(m.workspace ?? "?", 500)}, sandbox ${m.sandbox ?? "auto"}${
    event.instructions === undefined ? "" : `\n  instructions ${event.instructions.length} characters: ${oneLine(event.instructions, 100)}`
  }${policy(event.options) === "" ? "" : `\n  approval ${policy(event.options)}`}`

/**
 * The first lines of `rx resume`: the goal, the settings it goes on with, where it stands, and
 * the call rx stopped during, if any (its outcome is recorded next: run again, or unknown).
 */
export const resumeLine = (
  state: State.State,
  m: { readonly model?: string | undefined; readonly baseUrl?: string | undefined; readonly modelFile?: string | undefined; readonly workspace?: string | undefined; readonly sandbox?: string | undefined }
) => {
  const where = state.terminated !== null
    ? `terminated (${state.terminated.reason})`
    : state.suspended !== null
    ? `suspended (${state.suspended.reason})`
    : "open, not suspended (rx stopped while it ran)"
  const pending = state.pending
  return [
    `resuming goal ${state.goalId}: ${oneLine(state.goal, 2_000)}`,
    `  model ${oneLine(m.model ?? "?", 200)} ${m.modelFile === undefined ? `at ${oneLine(redactUserinfo(m.baseUrl ?? "?"), 200)}` : `in rx, from ${oneLine(m.modelFile, 500)}`}, workspace ${oneLine(m.workspace ?? "?", 500)}, sandbox ${m.sandbox ?? "auto"}`,
    `  ${where}, after ${plural(state.completed, "iteration")}`,
    ...(pending === null ? [] : [`  rx stopped during call ${oneLine(pending.callId, 80)}: ${oneLine(pending.tool, 40)} ${oneLine(json(pending.input), 200)}`])
  ].join("\n")
}

/** The approval policy of a run's options, `shell=ask, http_fetch=deny`; empty when every tool runs. */
const policy = (options: Options.Options) => Object.entries(options.approval).map(([tool, p]) => `${oneLine(tool, 40)}=${p}`).join(", ")

/** A recorded setting as shown; a URL's user and password never (a log of an older rx may hold them). */
const show = (value: unknown) => oneLine(typeof value === "string" ? redactUserinfo(value) : json(value), 200)

/** Changed options as one line, `name value (was old)` each: the limits, then each setting the transport recorded. */
const changesText = (changes: ReadonlyArray<View.Change>): string =>
  changes.length === 0
    ? "nothing"
    : changes.map((c) => `${c.name} ${c.value === undefined ? "(unset)" : show(c.value)} (was ${c.was === undefined ? "unset" : show(c.was)})`).join(", ")

/** What changed between two options (workspace, sandbox, model, the limits, ...). */
export const optionsDiff = (before: Options.Options, after: Options.Options): string => changesText(View.changes(before, after))

/**
 * Every call that asked for approval, with who decided what and when; a call still waiting is
 * shown whole (or says how much is not shown, and where to see it), as a person decides on it.
 */
const approvals = (goalId: string, steps: ReadonlyArray<View.Step>): ReadonlyArray<string> => {
  const all = steps.flatMap((s) => s.entries.map((e) => [s.step, e] as const))
  const decided = new Map<string, View.Entry & { readonly _tag: "ApprovalDecided" }>()
  for (const [, e] of all) if (e._tag === "ApprovalDecided" && !decided.has(e.callId)) decided.set(e.callId, e)
  return all.flatMap(([step, e]) => {
    if (e._tag !== "ApprovalRequested") return []
    const d = decided.get(e.callId)
    const whole = `rx inspect ${goalId} --step ${step}`
    const when = `  call ${oneLine(e.callId, 80)} (seq ${e.seq}, ${date(e.at)}): `
    if (d !== undefined) return [`${when}${oneLine(e.tool, 40)} ${oneLineOr(json(e.input), 120, whole)}`, `    ${decision(d)} at ${date(d.at)} (seq ${d.seq})`]
    const [head, ...input] = callView(e.tool, e.input, whole)
    return [`${when}${head ?? ""}`, ...input.map((line) => `  ${line}`), "    waiting: nobody has decided yet"]
  })
}

const date = (at: number) => new Date(at).toISOString()

/** What a line of `rx list` shows of a goal: its summary, from a local log or a server. */
export type Listed = Pick<GoalSummary.GoalSummary, "goalId" | "goal" | "iterations" | "reason" | "suspended" | "submittedAt" | "updatedAt"> & {
  readonly status: string
  /** The goal that delegated it, for a sub-goal. */
  readonly parent?: string | null | undefined
  /** The goal and step it was forked from, for a fork (`rx fork`). */
  readonly forkedFrom?: { readonly goalId: string; readonly iteration: number } | null | undefined
  /** The call waiting for a person's decision, if any. */
  readonly approval: object | null
  /** Whether a runner holds it now: read from a local log's lease, */
  readonly running?: boolean | undefined
  /** or said by a server (`running`, `queued`, `idle`). */
  readonly activity?: string | undefined
}

/** The goal a goal is listed under: the one that delegated it, else the one it was forked from. */
const above = (g: Listed): string | null => g.parent ?? g.forkedFrom?.goalId ?? null

/** What the goal does now (`GoalSummary.phase`): from its summary, and whether a runner holds it. */
export const phaseOf = (g: Listed): GoalSummary.Phase =>
  GoalSummary.phase(g, g.activity !== undefined ? g.activity !== "idle" : g.running === true)

/** A goal's status: `running`, `waiting(approval|sub-goal|outage)`, `idle(stopped|shutdown|decided)` or `terminated(reason)`. */
export const status = (g: Listed) => phaseLabel(phaseOf(g))

export const phaseLabel = (p: GoalSummary.Phase): string => {
  switch (p._tag) {
    case "terminated":
      return `terminated(${p.reason ?? "?"})`
    case "running":
      return "running"
    case "waiting":
      return `waiting(${p.on})`
    case "idle":
      return `idle(${p.why})`
  }
}

/** What an open goal does now, and what continues it, in words (`rx inspect`). */
export const phaseSentence = (p: GoalSummary.Phase, goalId: string, where = ""): string => {
  const id = shellWord(goalId)
  switch (p._tag) {
    case "terminated":
      return `terminated (${p.reason ?? "?"})`
    case "running":
      return "running: a runner holds it now"
    case "waiting":
      return p.on === "approval"
        ? `waiting: a call waits for a person's decision (rx approve ${id}${where} or rx deny ${id}${where})`
        : p.on === "sub-goal"
        ? `waiting on its sub-goal ${oneLine(p.child ?? "?", 200)} (rx inspect ${shellWord(p.child ?? "?")}${where} says what it waits on)`
        : `waiting: its model was unreachable (rx resume ${id}${where} once it answers)`
    case "idle":
      return p.why === "decided"
        ? `idle: the call it waited on is decided, and nothing runs it (rx resume ${id}${where} goes on)`
        : `idle: nothing runs it (${p.why === "shutdown" ? "its runner was shut down" : "its runner stopped or was killed"} before it ended): rx resume ${id}${where} continues it`
  }
}

/** A goal's phase as JSON (`View.Phase`): `{"state": "running" | "waiting" | "idle" | "terminated", ...}`. */
export const phaseJson = Schema.encodeSync(View.Phase)

/** `rx list` of a log with no goals, or of none yet (before any run): where, and what starts one. */
export const noGoals = (db: { readonly label: string; readonly postgres: boolean }, exists: boolean): string =>
  exists || db.postgres
    ? "no goals yet (rx run \"<goal>\" starts one)"
    : `no goals yet: no log at ${db.label} yet (rx run "<goal>" starts a goal and creates it there; --db or RX_DB names another log)`

/** The note under `rx list` when some goals are idle: what continues them. */
export const idleHint = (goals: ReadonlyArray<Listed>, where = ""): string | undefined => {
  const idle = goals.filter((g) => phaseOf(g)._tag === "idle")
  if (idle.length === 0) return undefined
  const first = idle[0]?.goalId ?? ""
  return `idle: nothing runs ${idle.length === 1 ? "that goal" : `those ${idle.length} goals`}; rx resume <goal>${where} continues one (rx resume ${shellWord(first)}${where})`
}

/**
 * The goals as `rx list` orders them: newest first, each goal's sub-goals right after it (oldest
 * first, as they were delegated), each with its depth below the goal listed above it (0 for a
 * goal whose parent is not listed).
 */
export const tree = <G extends Listed>(goals: ReadonlyArray<G>): ReadonlyArray<readonly [G, number]> => {
  const ids = new Set(goals.map((g) => g.goalId))
  const children = new Map<string, Array<G>>()
  for (const g of goals) {
    const up = above(g)
    if (up === null || !ids.has(up)) continue
    children.set(up, [g, ...(children.get(up) ?? [])])
  }
  const out: Array<readonly [G, number]> = []
  const visit = (g: G, depth: number) => {
    out.push([g, depth])
    for (const child of children.get(g.goalId) ?? []) visit(child, depth + 1)
  }
  for (const g of goals) if (above(g) === null || !ids.has(above(g) ?? "")) visit(g, 0)
  return out
}

/** The goal column of `rx list`: a sub-goal marked `└`, a fork `⑂`, indented by its depth. */
const listedId = (g: Listed, depth: number) => (depth === 0 ? g.goalId : `${"  ".repeat(depth - 1)}${g.parent == null && g.forkedFrom != null ? "⑂" : "└"} ${g.goalId}`)

/** The text column: a fork says where it was forked. */
const listedText = (g: Listed) => (g.forkedFrom == null ? g.goal : `(fork of ${g.forkedFrom.goalId} at step ${g.forkedFrom.iteration}) ${g.goal}`)

/** How wide the goal column of these goals is: 18, or more for longer ids. */
export const listWidth = (goals: ReadonlyArray<readonly [Listed, number]>) => Math.max(18, ...goals.map(([g, depth]) => listedId(g, depth).length + 1))

/** `rx list`: one line per goal, saying why an open goal waits, if it does; a sub-goal marked `└`, under the goal that delegated it. */
export const listLine = (g: Listed, depth = 0, width = 18, continuedBy: ReadonlyArray<string> = []) =>
  `${pad(listedId(g, depth), width)} ${pad(status(g), 28)} ${String(g.iterations).padStart(5)} it  ${date(g.submittedAt)}  ${g.status === "terminated" ? date(g.updatedAt) : "-".padEnd(24)}  ${oneLine(listedText(g), 60)}${
    continuedBy.length === 0 ? "" : `  (continued by ${continuedBy.map((id) => oneLine(id, 200)).join(", ")})`
  }`

/** The header of `rx list`: each label over its cells (the iterations right-aligned, as their counts are). */
export const listHeaderOf = (width: number) => `${pad("GOAL", width)} ${pad("STATUS", 28)} ${"ITER".padStart(5)}     ${pad("STARTED", 24)}  ${pad("ENDED", 24)}  TEXT`

/** What a summary says of itself in one line. */
export const summaryLine = (e: View.Entry & { readonly _tag: "TurnsSummarised" } | Event.Of<"TurnsSummarised">) =>
  e.failed === undefined
    ? `summarised steps ${e.from} to ${e.to}${e.cut === true ? " (cut to fit)" : ""}, ${e.usage.inputTokens} tokens in, ${e.usage.outputTokens} out`
    : `no summary of steps ${e.from} to ${e.to} (${oneLine(e.failed, 100)}): they are only counted`

/**
 * A step in full (`View.Step`): decision, each call with its input and output or error,
 * approvals, suspensions, state summary. `goalId` names the command that shows a cut call whole.
 */
export const step = (s: View.Step, width: number, goalId: string): ReadonlyArray<string> => {
  const lines: Array<string> = [s.summary === true ? "summary" : `step ${s.step}`]
  const cut = (text: string) => (width === Infinity ? cap(text) : oneLine(text, width))
  // A cut call says how long it is and where to see it whole (it may be one a person decides on).
  const whole = `rx inspect ${goalId} --step ${s.step}`
  // Which call of the answer an entry is about, said only when the answer made several.
  const several = s.entries.some((e) => e._tag === "ModelResponded" && e.calls.length > 1)
  const which = (index: number | undefined) => (several && index !== undefined ? `[${index}] ` : "")
  for (const e of s.entries) {
    switch (e._tag) {
      case "ModelResponded": {
        const cutOff = e.finishReason === "length" ? " (cut off)" : ""
        if (e.calls.length === 0) lines.push(`  model     ${cut(e.text)}${cutOff}`)
        e.calls.forEach((call, i) => {
          const label = e.calls.length === 1 ? "model    " : i === 0 ? `model [${i}]` : `      [${i}]`
          const text = `${call.name} ${call.arguments}`
          lines.push(`  ${label} ${width === Infinity ? cap(text) : oneLineOr(text, width, whole)}${cutOff}`)
        })
        if (e.calls.length > 0 && e.text.trim() !== "") lines.push(`  thought   ${cut(e.text)}`)
        lines.push(`  usage     ${e.usage.inputTokens} in, ${e.usage.outputTokens} out`)
        break
      }
      case "ModelFailed":
        lines.push(`  model     failed: ${cut(e.message)}`)
        break
      case "ActionRejected":
        lines.push(`  rejected  ${whichCall(e)}${e.kind}: ${cut(e.reason)}`)
        break
      case "Call": {
        // An outcome whose start the log does not hold shows no input.
        if (e.endSeq !== e.seq) lines.push(`  tool      ${which(e.index)}${oneLine(e.tool, 80)} (call ${oneLine(e.callId, 80)})`, `  input     ${cut(json(e.input))}`)
        if (e.failed !== undefined) lines.push(`  failed    ${e.failed}${e.stderrLastLine === undefined || e.stderrLastLine === "" ? "" : `, last line of stderr: ${cut(e.stderrLastLine)}`}`)
        if (e.endSeq !== undefined && e.error === undefined) lines.push(`  output    ${cut(json(e.output))}`)
        if (e.error !== undefined) lines.push(`  error     ${e.error.kind}: ${cut(e.error.message)}`)
        if (e.endSeq !== undefined) {
          lines.push(
            e.durationMs === null || e.durationMs === undefined
              ? `  duration  unknown: rx stopped during the call (${e.spanMs ?? "?"} ms from its start to this record, rx's downtime included)`
              : `  duration  ${e.durationMs} ms`
          )
        }
        break
      }
      case "ApprovalRequested":
        // What a person decides on: in full in the step's own view, else said how long, and where to see it.
        lines.push(
          `  approval  ${which(e.index)}${oneLine(e.tool, 80)} (call ${oneLine(e.callId, 80)}) waits for a person's approval, requested ${date(e.at)}`,
          ...(width === Infinity
            ? ["  input     in full:", ...callView(e.tool, e.input, whole, Infinity).slice(1).map((line) => `  ${line}`)]
            : [`  input     ${oneLineOr(json(e.input), width, whole)}`])
        )
        break
      case "ApprovalDecided":
        lines.push(`  decided   ${decision(e)} (call ${oneLine(e.callId, 80)}, ${date(e.at)})`)
        break
      case "Suspended":
        lines.push(`  suspended ${e.reason}: ${cut(e.detail)} (${date(e.at)})`)
        break
      case "IterationCompleted":
        lines.push(`  state     ${plural(e.toolCalls, "call")}, ${plural(e.consecutiveFailures, "failure")} in a row, ${e.consecutiveMalformed} rejected in a row, ${e.idleIterations} idle, repeats ${e.repeats}`)
        break
      case "CancelRequested":
        lines.push(`  cancel    ${cut(e.reason)}`)
        break
      case "OptionsChanged":
        lines.push(`  options   changed (seq ${e.seq}): ${changesText(e.changes)}`)
        break
      case "Terminated":
        lines.push(`  end       ${e.reason}: ${cut(e.detail)}`)
        break
      case "MessageSent":
        lines.push(`  message   from ${oneLine(e.by, 80)} (${date(e.at)}): ${cut(e.text)}`)
        break
      case "TurnsSummarised":
        lines.push(`  ${summaryLine(e)}`, ...(e.failed === undefined ? [`  text      ${cut(e.text)}`] : []))
        break
    }
  }
  return lines
}

/** `rx inspect --json`: the view's encoding. */
export const encodeGoal = Schema.encodeSync(View.Goal)

/** A step as `rx inspect --json --step N` gives it: the view's encoding. */
export const encodeStep = Schema.encodeSync(View.Step)

/** The lines of `rx inspect` that place a goal in its tree: its parent and call, what it continues, its sub-goals and forks. */
const treeLines = (v: View.Goal): ReadonlyArray<string> => [
  ...(v.parent === null ? [] : [`parent    ${oneLine(v.parent.goalId, 200)} (its call ${oneLine(v.parent.callId, 200)}, depth ${v.parent.depth}): rx inspect ${shellWord(v.parent.goalId)}`]),
  ...(v.continues === null || v.continuedWith === null
    ? []
    : [`continues ${oneLine(v.continues, 200)} (ended ${v.continuedWith.reason}), with: ${oneLine(v.continuedWith.text, 200)}: rx inspect ${shellWord(v.continues)}`]),
  ...v.continuedBy.map((id) => `continued by ${oneLine(id, 200)}: rx inspect ${shellWord(id)}`),
  ...v.children.map((c, i) => `${i === 0 ? "sub-goals" : "         "} ${pad(oneLine(c.goalId, 200), 18)} ${pad(phaseLabel(c.phase), 28)} ${oneLine(c.goal, 60)}`)
]

/** `rx inspect`: the goal, its place in its tree, every step, the tool trace, the termination audit; `where` is the flag that names its log (` --db x`). */
export const inspect = (v: View.Goal, where = ""): ReadonlyArray<string> => {
  const o = v.options
  const metadata = Object.entries({ ...o.settings, ...o.metadata }).map(([k, value]) => `${oneLine(k, 40)}=${show(value)}`).join(", ")
  const approval = policy(o)
  const asked = approvals(v.goalId, v.steps)
  const entries = v.steps.flatMap((s) => s.entries.map((e) => [s.step, e] as const))
  const suspensions = entries.flatMap(([i, e]) => (e._tag === "Suspended" ? [[i, e] as const] : []))
  const trace = entries.flatMap(([i, e]) => (e._tag === "Call" && e.endSeq !== undefined ? [[i, e] as const] : []))
  const summaries = entries.flatMap(([, e]) => (e._tag === "TurnsSummarised" ? [e] : []))
  const summaryTokens = summaries.reduce((n, e) => n + e.usage.inputTokens + e.usage.outputTokens, 0)
  return [
    `goal      ${v.goalId}`,
    `text      ${cap(v.goal, 4_000)}`,
    `submitted ${v.submittedAt.toISOString()}`,
    `status    ${
      v.terminated !== null
        ? `terminated (${v.terminated.reason})`
        : v.phase === undefined
        ? `open${v.suspended === null ? "" : `, suspended (${v.suspended.reason})`}`
        : `open, ${phaseSentence(v.phase, v.goalId, where)}`
    }, ${plural(v.iterations, "iteration")}, ${plural(v.events, "event")}`,
    ...(v.suspended?.child === undefined ? [] : [`waits on  its sub-goal ${oneLine(v.suspended.child, 200)}: ${oneLine(v.suspended.detail, 200)}`]),
    ...treeLines(v),
    `limits    maxIterations ${o.maxIterations}, maxConsecutiveFailures ${o.maxConsecutiveFailures}, maxMalformed ${o.maxMalformed}, maxRepeats ${o.maxRepeats}, noProgressWindow ${o.noProgressWindow}, promptBudget ${o.promptBudget}, maxCallsPerAnswer ${o.maxCallsPerAnswer}${
      o.maxTotalTokens === undefined ? "" : `, maxTotalTokens ${o.maxTotalTokens}`
    }${o.compact === false ? ", compact off" : ""}${o.maxDepth === undefined ? "" : `, maxDepth ${o.maxDepth}`}${o.maxChildren === undefined ? "" : `, maxChildren ${o.maxChildren}`}${
      o.maxTreeGoals === undefined ? "" : `, maxTreeGoals ${o.maxTreeGoals}`
    }${o.maxTreeIterations === undefined ? "" : `, maxTreeIterations ${o.maxTreeIterations}`}`,
    ...(approval === "" ? [] : [`approval  ${approval} (others auto)`]),
    ...(v.instructions === undefined ? [] : [`instructions ${oneLine(v.instructions, 200)} (${v.instructions.length} characters)`]),
    ...(metadata === "" ? [] : [`settings  ${metadata}`]),
    ...v.optionsChanged.map((c, i) => `${i === 0 ? "changed  " : "         "} seq ${c.seq} (${date(c.at)}, after iteration ${c.iteration}): ${changesText(c.changes)}`),
    `tools     ${oneLine(v.tools.join(", "), 2_000)}`,
    `usage     ${v.usage.inputTokens} tokens in, ${v.usage.outputTokens} out${
      summaries.length === 0 ? "" : ` (${summaryTokens} of them in ${plural(summaries.length, "summary", "summaries")})`
    }`,
    "",
    ...v.steps.flatMap((s) => [...step(s, 120, v.goalId), ""]),
    ...(asked.length === 0 ? [] : ["approvals", ...asked, ""]),
    ...(suspensions.length === 0 ? [] : [
      "suspensions",
      ...suspensions.map(([i, e]) => `  seq ${e.seq} (${date(e.at)}, iteration ${i}): ${e.reason}: ${oneLine(e.detail, 200)}`),
      ""
    ]),
    "tool trace",
    ...trace.map(([i, e]) => {
      const time = e.durationMs === null || e.durationMs === undefined ? "cut short" : `${String(e.durationMs).padStart(6)} ms`
      const stderr = e.stderrLastLine === undefined || e.stderrLastLine === "" ? "" : `  stderr: ${oneLine(e.stderrLastLine, 60)}`
      return `  ${String(i).padStart(4)}  ${pad(oneLine(e.tool, 40), 12)} ${pad(e.failed ?? e.outcome, 11)} ${time.padStart(9)}  ${oneLine(json(e.input), 60)}${stderr}`
    }),
    "",
    "termination",
    ...v.termination.map((l) => `  ${l}`),
    ...(v.forkedFrom === null ? [] : [`forked from ${v.forkedFrom.goalId} at step ${v.forkedFrom.iteration} (its steps 1 to ${v.forkedFrom.iteration} are copied here): rx inspect ${v.forkedFrom.goalId}`]),
    ...(v.forks.length === 0 ? [] : [`forks     ${v.forks.map((f) => `${f.goalId} (at step ${f.iteration})`).join(", ")}`])
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
