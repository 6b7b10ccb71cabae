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
  first.forEach(push)
  const answer = draft.answer
  const { goalId, iteration } = draft
  const at = () => ({ goalId, seq: draft.seq, iteration, at: now() })
  const close = (): Step => {
    const completed: Event.Of<"IterationCompleted"> = { _tag: "IterationCompleted", ...at(), summary: State.summary(draft) }
    push({ ...completed, summary: State.summary(State.reduce(draft, completed)) })
    return { batch, after: draft }
  }
  if (answer === null) return { batch, after: draft }
  if (answer.next >= answer.calls) return close()
  if (!decide) return { batch, after: draft }
  const rules = Behaviour.rules(draft.behaviour)
  const limits = { ...rules, maxCallsPerAnswer: draft.options.maxCallsPerAnswer }
  const planned = Action.plan(answer.response, limits)
  if (planned._tag === "Reject") {
    const { kind, raw, reason } = planned
    push({ _tag: "ActionRejected", ...at(), kind, reason, raw })
  }
  const calls = planned._tag === "Calls" ? planned.calls : []
  for (let index = answer.next; index < calls.length; index++) {
    const callId = Event.callId(goalId, iteration, index)
    const call = calls[index] as Action.Parsed
    const decision = Action.decideCall(call, draft.tools, (tool, input) => prepare({ callId, tool, input }), limits)
    const one = rules.multiCall ? { index } : {}
    if (decision._tag === "Done") {
      close()
      push({ _tag: "Terminated", ...at(), reason: "done", detail: decision.summary })
      return { batch, after: draft }
    }
    if (decision._tag === "Reject") {
      const { kind, raw, reason, tool, validation } = decision
      push({
        _tag: "ActionRejected", ...at(), kind, reason, raw,
        ...(validation === undefined ? {} : { validation }),
        ...(rules.multiCall && tool !== undefined ? { index, tool } : {})
      })
      continue
    }
    const { input, tool } = decision
    const policy = draft.options.approval[tool] ?? "auto"
    if (policy === "deny") {
      push({ _tag: "ActionRejected", ...at(), kind: "denied", reason: `${tool} is not allowed in this run`, raw: "", index, tool })
      continue
    }
    if (policy === "ask") {
      push({ _tag: "ApprovalRequested", ...at(), callId, tool, input, ...one })
      return { batch, after: draft }
    }
    push({ _tag: "ToolStarted", ...at(), callId, tool, input, ...one })
    const recorded = batch.map((e) => {
      const response = rules.inputOnce && e._tag === "ModelResponded" ? Action.withoutArguments(e.response, index) : undefined
      return response === undefined || e._tag !== "ModelResponded" || response === e.response ? e : { ...e, response }
    })
    // The draft was folded from the events as drafted; an elided answer is folded again as recorded.
    const same = recorded.every((e, i) => e === batch[i])
    return { batch: recorded, after: same ? draft : undefined, call: decision.prepared }
  }
  return close()
}
