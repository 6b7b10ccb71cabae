/**
 * An answer's calls, worked through in order: what the runner records next. Every call of an
 * answer is decided on its own (a bad one is rejected alone), a call the approval policy denies
 * is rejected, one it asks about waits, and the first that may run ends the batch with its
 * `ToolStarted`; the iteration ends after the last call.
 */
import * as Action from "./Action.js"
import * as Behaviour from "./Behaviour.js"
import * as Event from "./Event.js"
import * as State from "./State.js"
import type * as ToolRegistry from "./ToolRegistry.js"

/** The events to commit, the State they lead to (unless the log keeps them otherwise), and the call to run after them. */
export interface Step {
  readonly batch: ReadonlyArray<Event.Event>
  readonly after: State.State | undefined
  readonly call?: ToolRegistry.Prepared
}

/** What drafting needs from the run: whether to decide further calls, the clock, the registry's check. */
export interface Context {
  /** Without it, calls left in the answer wait for the next batch (an outcome is then recorded on its own). */
  readonly decide: boolean
  readonly now: () => number
  readonly prepare: ToolRegistry.Service["prepare"]
}

/**
 * After `first` (the answer itself, or a call's outcome), the next batch of the current answer:
 * its rejected and denied calls, then the call that starts (`ToolStarted`, committed before it
 * runs), a call that waits for approval, or the end of the iteration. Pure but for the clock
 * reads and the registry's checks.
 */
export const step = (state: State.State, first: ReadonlyArray<Event.Event>, { decide, now, prepare }: Context): Step => {
  const batch: Array<Event.Event> = []
  let draft = state
  const push = (event: Event.Event) => {
    batch.push(event)
    draft = State.reduce(draft, event)
  }
  for (const event of first) push(event)
  const answer = draft.answer
  const { goalId, iteration } = draft
  // Events are built as literals with every field in place, not spread: this runs every iteration.
  //
  // `IterationCompleted` records the summary of the State it leads to; folding it does not read
  // the summary, so the State folded to compute it is the State after it.
  const close = (): Step => {
    const seq = draft.seq
    const at = now()
    const after = State.reduce(draft, { _tag: "IterationCompleted", goalId, seq, iteration, at, summary: State.summary(draft) })
    batch.push({ _tag: "IterationCompleted", goalId, seq, iteration, at, summary: State.summary(after) })
    draft = after
    return { batch, after: draft }
  }
  if (answer === null) return { batch, after: draft }
  if (answer.next >= answer.calls) return close()
  if (!decide) return { batch, after: draft }
  const rules = Behaviour.rules(draft.behaviour)
  const limits: Action.Limits = {
    maxInputDepth: rules.maxInputDepth,
    multiCall: rules.multiCall,
    maxCallsPerAnswer: draft.options.maxCallsPerAnswer,
    boundedAnswer: rules.boundedAnswer,
    withheldRejected: rules.withheldRejected,
    repair: rules.repairs ? draft.tools : undefined,
    answerIsTheCall: rules.answerIsTheCall,
    // Only an answer in text is compared with the results shown (a native call never stands in one).
    results: rules.answerIsTheCall === true && answer.response.toolCalls.length === 0 ? results(draft) : undefined
  }
  const planned = Action.plan(answer.response, limits)
  if (planned._tag === "Reject") {
    const { kind, raw, reason } = planned
    push({ _tag: "ActionRejected", goalId, seq: draft.seq, iteration, at: now(), kind, reason, raw })
  }
  const calls = planned._tag === "Calls" ? planned.calls : []
  for (let index = answer.next; index < calls.length; index++) {
    const callId = Event.callId(goalId, iteration, index)
    const call = calls[index] as Action.Parsed
    const decision = Action.decideCall(call, draft.tools, (tool, input) => prepare({ callId, tool, input, goalId }), limits)
    if (decision._tag === "Done") {
      close()
      push({ _tag: "Terminated", goalId, seq: draft.seq, iteration, at: now(), reason: "done", detail: decision.summary })
      return { batch, after: draft }
    }
    if (decision._tag === "Reject") {
      const { kind, raw, reason, repair, tool, validation } = decision
      push({
        _tag: "ActionRejected", goalId, seq: draft.seq, iteration, at: now(), kind, reason, raw,
        ...(validation === undefined ? {} : { validation }),
        ...(rules.multiCall && tool !== undefined ? { index, tool } : {}),
        ...(repair === undefined ? {} : { repair })
      })
      continue
    }
    const { input, repair, tool } = decision
    const repaired = repair === undefined ? {} : { repair }
    const policy = draft.options.approval[tool] ?? "auto"
    if (policy === "deny") {
      push({ _tag: "ActionRejected", goalId, seq: draft.seq, iteration, at: now(), kind: "denied", reason: `${tool} is not allowed in this run`, raw: "", index, tool, ...repaired })
      continue
    }
    if (policy === "ask") {
      const base = { _tag: "ApprovalRequested", goalId, seq: draft.seq, iteration, at: now(), callId, tool, input, ...repaired } as const
      push(rules.multiCall ? { ...base, index } : base)
      return { batch, after: draft }
    }
    push(
      repair !== undefined
        ? { _tag: "ToolStarted", goalId, seq: draft.seq, iteration, at: now(), callId, tool, input, index, repair }
        : rules.multiCall
        ? { _tag: "ToolStarted", goalId, seq: draft.seq, iteration, at: now(), callId, tool, input, index }
        : { _tag: "ToolStarted", goalId, seq: draft.seq, iteration, at: now(), callId, tool, input }
    )
    const elided = rules.inputOnce ? elide(batch, index) : batch
    // The draft was folded from the events as drafted; an elided answer is folded again as recorded.
    return { batch: elided, after: elided === batch ? draft : undefined, call: decision.prepared }
  }
  // The calls past the cap, all in one rejection: what one answer records stays bounded.
  const dropped = planned._tag === "Calls" ? planned.dropped : 0
  if (dropped > 0 && draft.answer !== null && draft.answer.next < draft.answer.calls) {
    const { maxCallsPerAnswer } = draft.options
    const reason = Action.droppedReason(maxCallsPerAnswer + dropped, maxCallsPerAnswer)
    push({ _tag: "ActionRejected", goalId, seq: draft.seq, iteration, at: now(), kind: "too_many_calls", reason, raw: "", dropped })
  }
  return close()
}

/** The tool results the model was shown: a call written as text that stands in one is an echo (behaviour 5). */
const results = (state: State.State): ReadonlyArray<string> => {
  const shown: Array<string> = []
  for (const turn of state.turns) {
    for (const call of turn.calls) if (call.result !== null && call.result.status !== "rejected") shown.push(call.result.content)
  }
  return shown
}

/** The batch with the started call's arguments left out of its answer (they are in `ToolStarted`); the same array if none was. */
const elide = (batch: ReadonlyArray<Event.Event>, index: number): ReadonlyArray<Event.Event> => {
  let changed = false
  const recorded = batch.map((e) => {
    if (e._tag !== "ModelResponded") return e
    const response = Action.withoutArguments(e.response, index)
    if (response === e.response) return e
    changed = true
    return { ...e, response }
  })
  return changed ? recorded : batch
}
