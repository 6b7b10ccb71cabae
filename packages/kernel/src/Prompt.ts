/**
 * The model's input, a pure function of State: the same State gives a byte-identical request.
 * It fits a budget: recent turns are shown in full, older tool output is cut harder, and the
 * oldest turns are only counted, so prompt size stays flat however long the run.
 */
import type * as LanguageModel from "./LanguageModel.js"
import { truncate } from "./internal/json.js"
import type * as State from "./State.js"
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

/** Build the request for the next model call. */
export const build = (state: State.State): LanguageModel.Request => {
  const budget = state.options.promptBudget
  const goal = goalText(state.goal, state.instructions, maxGoalChars(state.options))
  // Room for the omitted-turns note, whatever its count.
  let used = system.length + goal.length + 80
  const turns = state.turns
  // The newest turns that fit, newest first.
  const fitting: Array<Rendered> = []
  let count = 1
  for (let rank = 0; rank < turns.length; rank++) {
    const entry = rendered(turns[turns.length - 1 - rank] as State.Turn, rank, budget)
    if (used + entry.cost > budget) break
    used += entry.cost
    count += entry.messages.length
    fitting.push(entry)
  }
  const omitted = state.omitted + turns.length - fitting.length
  const messages = new Array<LanguageModel.Message>(count)
  messages[0] = { role: "user", content: omitted > 0 ? `${goal}\n\n(${omitted} earlier steps are not shown.)` : goal }
  let at = 1
  for (let rank = fitting.length - 1; rank >= 0; rank--) {
    for (const message of (fitting[rank] as Rendered).messages) messages[at++] = message
  }
  return { system, messages, tools: offered(state.tools) }
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
