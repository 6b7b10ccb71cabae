/**
 * The model's input, a pure function of State: the same State gives a byte-identical request.
 * It fits a budget: recent turns are shown in full, older tool output is cut harder, and the
 * oldest turns are summarised (behaviour 5: `next` asks for the summary first) or only counted,
 * so prompt size stays flat however long the run.
 */
import * as Behaviour from "./Behaviour.js"
import { truncate } from "./internal/json.js"
import type * as LanguageModel from "./LanguageModel.js"
import * as State from "./State.js"
import type * as Tool from "./Tool.js"
import * as ToolRegistry from "./ToolRegistry.js"

export const system = [
  "You are rx, an autonomous agent. You work toward the user's goal by calling tools.",
  "Rules:",
  "- Every reply calls at least one tool; several calls run in order. Text alone is not executed.",
  "- Check each result before relying on it; a failed call shows its error.",
  `- When the goal is achieved, or cannot be achieved, call \`${ToolRegistry.doneName}\` with a short summary.`
].join("\n")

/** The tool call id shown to the model for a call of an iteration (valid for every provider). */
export const callId = (iteration: number, index = 0): string => (index === 0 ? `call_${iteration}` : `call_${iteration}_${index}`)

/** Characters of a request counted against the budget: all text the model reads but tool specs. */
export const size = (request: LanguageModel.Request): number => {
  let total = request.system.length
  for (const message of request.messages) {
    total += message.content.length
    if (message.role === "assistant") {
      for (const call of message.toolCalls) total += call.name.length + call.arguments.length
    }
  }
  return total
}

/**
 * Characters of the goal (and of the instructions) a prompt shows with these options: a quarter
 * of the prompt budget. A longer text would be cut in every prompt: `Runner.submit` refuses such
 * a goal, and a transport can say so before it asks.
 */
export const maxGoalChars = (options: { readonly promptBudget: number }): number => Math.floor(options.promptBudget / 4)

/**
 * Whether the goal's prompts summarise the turns that leave them (behaviour 5, unless the options
 * say `compact: false`).
 */
export const compacts = (state: State.State): boolean =>
  Behaviour.rules(state.behaviour).compaction && state.options.compact !== false

/** Characters a summary may hold: an eighth of the prompt budget; a longer answer is cut. */
export const maxSummaryChars = (options: { readonly promptBudget: number }): number => Math.floor(options.promptBudget / 8)

/** What comes next: the request for the next action, or first a summary of the turns of iterations `from` to `to`. */
export type Next =
  | { readonly _tag: "Ask"; readonly request: LanguageModel.Request }
  | { readonly _tag: "Summarise"; readonly from: number; readonly to: number; readonly request: LanguageModel.Request }

/** Build the request for the next model call (the turns that do not fit are counted). */
export const build = (state: State.State): LanguageModel.Request => assemble(state, fit(state))

/**
 * The next request. With compaction, a prompt that would drop turns not yet summarised asks first
 * for a summary of the oldest of them: enough that the turns kept fill half the room, so the next
 * summary is many iterations away. Pure, like `build`; when nothing is dropped it costs what `build` does.
 */
export const next = (state: State.State): Next => {
  const window = fit(state)
  if (window.compacting && (window.fitting.length < window.unsummarised || window.unsummarised >= State.maxTurns)) {
    const to = summarisedThrough(state, window)
    if (to !== undefined) {
      const from = state.compacted.through + 1
      return { _tag: "Summarise", from, to, request: summaryRequest(state, from, to) }
    }
  }
  return { _tag: "Ask", request: assemble(state, window) }
}

interface Window {
  readonly goal: string
  readonly summary: string
  readonly fitting: ReadonlyArray<Rendered>
  /** Messages of the fitting turns plus the goal's. */
  readonly count: number
  /** Turns not summarised (all turns without compaction). */
  readonly unsummarised: number
  readonly compacting: boolean
}

/** The newest turns that fit, newest first, after the goal and the summary. */
const fit = (state: State.State): Window => {
  const budget = state.options.promptBudget
  const compacting = compacts(state)
  const goal = goalOf(state)
  const summary = compacting && state.compacted.text !== "" ? `\n\nWhat you did before the steps shown (your summary):\n${state.compacted.text}` : ""
  // Room for the omitted-turns note, whatever its count.
  let used = system.length + goal.length + summary.length + 80
  for (const message of state.inbox) used += said(message).content.length
  const turns = state.turns
  const through = compacting ? state.compacted.through : 0
  let unsummarised = turns.length
  const fitting: Array<Rendered> = []
  let count = 1
  let fits = true
  for (let rank = 0; rank < turns.length; rank++) {
    const turn = turns[turns.length - 1 - rank] as State.Turn
    if (turn.iteration <= through) {
      unsummarised = rank
      break
    }
    if (!fits) continue
    const entry = rendered(turn, rank, budget)
    if (used + entry.cost > budget) {
      fits = false
      if (!compacting) break
      continue
    }
    used += entry.cost
    count += entry.messages.length
    fitting.push(entry)
  }
  return { goal, summary, fitting, count, unsummarised, compacting }
}

const assemble = (state: State.State, window: Window): LanguageModel.Request => {
  const { count, fitting, goal, summary } = window
  const omitted = window.compacting
    ? state.compacted.lost + window.unsummarised - fitting.length
    : state.omitted + state.turns.length - fitting.length
  const messages = new Array<LanguageModel.Message>(count + state.inbox.length)
  messages[0] = { role: "user", content: omitted > 0 ? `${goal}${summary}\n\n(${omitted} earlier steps are not shown.)` : goal + summary }
  let at = 1
  for (let rank = fitting.length - 1; rank >= 0; rank--) {
    for (const message of (fitting[rank] as Rendered).messages) messages[at++] = message
  }
  // Messages sent to the goal since its last request, oldest first: shown once, here, then with the answer they preceded.
  for (const message of state.inbox) messages[at++] = said(message)
  return { system, messages, tools: offered(state.tools) }
}

/**
 * The newest iteration to summarise: the turns after it, the newest first, are kept while they fill
 * at most half the room a prompt has for turns (at least one, at most half of `State.maxTurns`).
 * `undefined` when every turn not yet summarised is kept.
 */
const summarisedThrough = (state: State.State, window: Window): number | undefined => {
  const budget = state.options.promptBudget
  const room = budget - (system.length + window.goal.length + maxSummaryChars(state.options) + summaryFraming + 80)
  const turns = state.turns
  let used = 0
  let kept = 0
  while (kept < window.unsummarised && kept < State.maxTurns / 2) {
    const cost = rendered(turns[turns.length - 1 - kept] as State.Turn, kept, budget).cost
    if (kept > 0 && used + cost > room / 2) break
    used += cost
    kept++
  }
  return kept >= window.unsummarised ? undefined : (turns[turns.length - 1 - kept] as State.Turn).iteration
}

/** Characters the prompt adds around a summary. */
const summaryFraming = 60

/** What the model is told when asked for a summary. */
export const summarySystem = [
  "You keep the memory of rx, an autonomous agent working toward a goal with tools.",
  "Its earliest steps are about to leave its prompt. Summarise them, together with the summary of the steps before them if there is one, so it can go on without them.",
  "Keep what it will need: files it created or changed, facts it learned, decisions and why, what failed and why, what is left to do.",
  "Answer with the summary alone, in plain text: call no tool."
].join("\n")

/** The request for a summary of the turns of iterations `from` to `to` (and the summary before them): plain text, no tools. Pure. */
export const summaryRequest = (state: State.State, from: number, to: number): LanguageModel.Request => {
  const budget = state.options.promptBudget
  const cap = maxSummaryChars(state.options)
  const goal = goalOf(state)
  const previous = state.compacted.text === "" ? "" : `\n\nYour summary of the steps before these:\n${state.compacted.text}`
  const ask = `\n\nWrite the summary now, in at most ${cap} characters.`
  const steps = state.turns.filter((turn) => turn.iteration >= from && turn.iteration <= to).map(transcript).join("\n\n")
  const room = Math.max(1_000, budget - summarySystem.length - goal.length - previous.length - ask.length - 40)
  return {
    system: summarySystem,
    messages: [{ role: "user", content: `${goal}${previous}\n\nThe steps to summarise:\n${truncate(steps, room)}${ask}` }],
    tools: [],
    format: "text"
  }
}

/** A turn as plain text, for the summary request. */
const transcript = (turn: State.Turn): string => {
  const lines = [`Step ${turn.iteration}:`, ...(turn.heard ?? []).map((m) => `${m.by} told you: ${truncate(m.text, capOf(1, 0))}`)]
  if (turn.text !== "") lines.push(`You wrote: ${truncate(turn.text, capOf(1, 0))}`)
  for (const call of turn.calls) {
    lines.push(`You called ${shownName(call.tool)} ${JSON.stringify(compact(call.input, capOf(2, 0)))}`)
    lines.push(call.result === null ? "(no result was recorded)" : `Result (${call.result.status}): ${truncate(call.result.content, capOf(1, 0))}`)
  }
  if (turn.result !== null) lines.push(`Not executed: ${truncate(turn.result.content, capOf(2, 0))}`)
  return lines.join("\n")
}

/** What a summary's answer records: its text, cut to `maxSummaryChars` (`cut`), or why it is no summary (`failed`). */
export const summaryOf = (
  response: LanguageModel.Response,
  options: { readonly promptBudget: number }
): { readonly text: string; readonly cut: boolean } | { readonly failed: string } => {
  const text = response.text.trim()
  if (response.finishReason === "content_filter") return { failed: "the model's summary was withheld by a content filter" }
  if (text === "") {
    return { failed: response.toolCalls.length > 0 ? "the model called a tool instead of writing a summary" : "the model's summary was empty" }
  }
  const cap = maxSummaryChars(options)
  return { text: truncate(text, cap), cut: text.length > cap || response.finishReason === "length" }
}

/** The goal as the prompt shows it, with what the ended goal it continues did, and the new instruction. */
const goalOf = (state: State.State): string => {
  const goal = goalText(state.goal, state.instructions, maxGoalChars(state.options))
  const c = state.continues
  if (c === null) return goal
  const cached = continued.get(c)
  if (cached !== undefined && cached.goal === goal) return cached.text
  const text = `${goal}\n\nThis goal continues goal ${c.goalId}, which ended (${c.reason}: ${c.detail}). What was done there:\n${c.done}\n\nYour new instruction:\n${c.text}`
  continued.set(c, { goal, text })
  return text
}
const continued = new WeakMap<object, { readonly goal: string; readonly text: string }>()

/**
 * What an ended goal did, as text for the goal that continues it, at most `max` characters: how it
 * ended, the goal it continued in turn (briefly), its summary, and its newest steps that fit.
 */
export const carried = (state: State.State, max: number): string => {
  const head: Array<string> = []
  if (state.continues !== null) head.push(`(It continued goal ${state.continues.goalId}: ${truncate(state.continues.done, Math.floor(max / 4))})`)
  if (state.compacted.text !== "") head.push(`Summary of its earlier steps:\n${state.compacted.text}`)
  let used = head.reduce((n, part) => n + part.length + 2, 0)
  const steps: Array<string> = []
  for (let i = state.turns.length - 1; i >= 0; i--) {
    const step = transcript(state.turns[i] as State.Turn)
    if (used + step.length + 2 > max && steps.length > 0) break
    used += step.length + 2
    steps.unshift(step)
  }
  return truncate([...head, ...steps].join("\n\n"), max)
}

/** The goal as the prompt shows it; the last one is kept, since a run asks with the same goal each time. */
let lastGoal = { goal: "", instructions: "", shows: -1, text: "" }
const goalText = (goal: string, instructions: string, shows: number): string => {
  if (lastGoal.goal === goal && lastGoal.instructions === instructions && lastGoal.shows === shows) return lastGoal.text
  const shown = instructions === "" ? "" : `\n\nInstructions:\n${truncate(instructions, shows)}`
  lastGoal = { goal, instructions, shows, text: `Goal:\n${truncate(goal, shows)}${shown}` }
  return lastGoal.text
}

/** The tools offered: the goal's, then `done`; one array per goal's tools (requests are read, never changed). */
const offeredCache = new WeakMap<ReadonlyArray<Tool.Spec>, ReadonlyArray<Tool.Spec>>()
const offered = (tools: ReadonlyArray<Tool.Spec>): ReadonlyArray<Tool.Spec> => {
  const cached = offeredCache.get(tools)
  if (cached !== undefined) return cached
  const all = [...tools, ToolRegistry.doneSpec]
  offeredCache.set(tools, all)
  return all
}

/** How much of a turn's output to show, by age: the newest in full, older ones less. */
const levelOf = (rank: number): 0 | 1 | 2 => (rank < 2 ? 0 : rank < 6 ? 1 : 2)
const capOf = (level: 0 | 1 | 2, budget: number): number =>
  level === 0 ? Math.min(Math.floor(budget / 4), 8_000) : level === 1 ? 1_500 : 300

interface Rendered {
  readonly messages: ReadonlyArray<LanguageModel.Message>
  readonly cost: number
}

/**
 * Rendering is a pure function of an immutable Turn and a cap; each Turn is rendered once per
 * level (and budget) and reused while it stays in the window, so building a prompt stays cheap.
 */
const cache = new WeakMap<State.Turn, { readonly budget: number; readonly byLevel: Array<Rendered | undefined> }>()

const rendered = (turn: State.Turn, rank: number, budget: number): Rendered => {
  const level = levelOf(rank)
  // The caps depend on the budget, which a resume may change: a turn is cached per budget.
  let cached = cache.get(turn)
  if (cached === undefined || cached.budget !== budget) {
    cached = { budget, byLevel: [undefined, undefined, undefined] }
    cache.set(turn, cached)
  }
  const byLevel = cached.byLevel
  let entry = byLevel[level]
  if (entry === undefined) {
    const cap = capOf(level, budget)
    // A turn with nothing to cut at this level nor the one before renders as at the one before.
    const before = level === 0 ? undefined : byLevel[level - 1]
    if (before !== undefined && fitsAt(turn, Math.min(cap, capOf((level - 1) as 0 | 1, budget)))) {
      entry = before
    } else {
      const messages = render(turn, cap)
      entry = { messages, cost: messages.reduce((n, m) => n + messageSize(m), 0) }
    }
    byLevel[level] = entry
  }
  return entry
}

/** What `compact` keeps of an input: strings up to `stringCap(cap)` characters, arrays up to `maxItems` items. */
const stringCap = (cap: number): number => Math.max(40, Math.floor(cap / 2))
const maxItems = 50

/** Whether rendering `turn` with `cap` cuts nothing: every text within `cap`, the inputs within what `compact` keeps. */
const fitsAt = (turn: State.Turn, cap: number): boolean =>
  turn.text.length <= cap && (turn.result === null || turn.result.content.length <= cap) &&
  turn.calls.every((call) => (call.result === null || call.result.content.length <= cap) && whole(call.input, stringCap(cap)))

/** Whether `compact` keeps `value` as it is: no string longer than `max`, no array longer than `maxItems`. */
const whole = (value: unknown, max: number): boolean => {
  if (typeof value === "string") return value.length <= max
  if (Array.isArray(value)) return value.length <= maxItems && value.every((v) => whole(v, max))
  if (value !== null && typeof value === "object") {
    for (const key in value) if (Object.hasOwn(value, key) && !whole((value as Record<string, unknown>)[key], max)) return false
  }
  return true
}

/** A rejected call that named no tool (a tool call entry with no function) is shown under this name: servers refuse an empty one. */
const shownName = (tool: string): string => (tool === "" ? "unnamed_call" : tool)

/** A turn as messages: an assistant message and a result for each of its calls, never one without the other. */
const render = (turn: State.Turn, cap: number): ReadonlyArray<LanguageModel.Message> => {
  const messages = answer(turn, cap)
  return turn.heard === undefined ? messages : [...turn.heard.map(said), ...messages]
}

/** A message sent to the goal, as the user's message the model reads. */
const said = (message: { readonly by: string; readonly text: string }): LanguageModel.Message => ({
  role: "user",
  content: `Message from ${message.by} while you work:\n${message.text}`
})

const answer = (turn: State.Turn, cap: number): ReadonlyArray<LanguageModel.Message> => {
  const text = truncate(turn.text, cap)
  const result = turn.result === null ? "(no result was recorded)" : truncate(turn.result.content, cap)
  if (turn.calls.length > 0) {
    const ids = turn.calls.map((_, index) => callId(turn.iteration, index))
    const toolCalls = turn.calls.map((call, index) => ({
      id: ids[index] ?? "",
      name: shownName(call.tool),
      arguments: JSON.stringify(compact(call.input, cap))
    }))
    const results = turn.calls.map((call, index): LanguageModel.Message => {
      const content = call.result === null ? "(no result was recorded)" : truncate(call.result.content, cap)
      const base = { role: "tool" as const, toolCallId: ids[index] ?? "", name: shownName(call.tool), content }
      return call.result?.status === "ok" ? base : { ...base, isError: true }
    })
    // Calls of the answer that were dropped as a whole (past the cap) are not shown as calls: a note says so.
    const note: ReadonlyArray<LanguageModel.Message> = turn.result === null ? [] : [{ role: "user", content: `Not all of your reply was executed: ${result}` }]
    return [{ role: "assistant", content: text, toolCalls }, ...results, ...note]
  }
  return [
    { role: "assistant", content: text.length > 0 ? text : "(no text)", toolCalls: [] },
    { role: "user", content: turn.result?.status === "rejected" ? `Your reply was not executed: ${result}` : result }
  ]
}

const messageSize = (message: LanguageModel.Message): number =>
  message.content.length +
  (message.role === "assistant" ? message.toolCalls.reduce((n, c) => n + c.name.length + c.arguments.length, 0) : 0)

/** The input with long strings cut, so the arguments stay valid JSON within the cap. */
const compact = (value: unknown, cap: number): unknown => {
  if (typeof value === "string") return truncate(value, stringCap(cap))
  if (Array.isArray(value)) return value.slice(0, maxItems).map((v) => compact(v, cap))
  if (value !== null && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, compact(v, cap)]))
  }
  return value
}
