/**
 * A goal as its log says it is: its State (`restore`, from the store), how it stands (`result`:
 * ended, or open and waiting), and the error for an id no log has. Below the runner and the
 * functions that append from outside it (`Control`), which both read goals this way.
 */
import { Effect, Option, Schema } from "effect"
import type * as Event from "./Event.js"
import * as State from "./State.js"
import { StateStore, type StoreError } from "./StateStore.js"

/** No goal with this id is in the store. */
export class GoalNotFound extends Schema.TaggedError<GoalNotFound>()("@rx/kernel/GoalNotFound", { goalId: Schema.String }) {
  override get message() {
    return `no goal with id ${this.goalId}`
  }
}

/** A goal's State: its latest snapshot, if any, with the events after it folded in. */
export const restore = (goalId: string): Effect.Effect<State.State, StoreError, StateStore> =>
  Effect.gen(function*() {
    const store = yield* StateStore
    const snapshot = yield* store.snapshot(goalId)
    const base = Option.match(snapshot, { onNone: () => State.empty(goalId), onSome: (s) => s.state })
    return State.fold(base, yield* store.load(goalId, base.seq))
  })

/** How a run stopped: the goal ended (`terminated`), or it waits, open, for `resume` (`suspended`). */
export type Result =
  | {
    readonly status: "terminated"
    readonly goalId: string
    readonly reason: Event.Reason
    readonly detail: string
    readonly iterations: number
    readonly state: State.State
  }
  | {
    readonly status: "suspended"
    readonly goalId: string
    readonly reason: Event.SuspendReason
    readonly detail: string
    readonly iterations: number
    readonly state: State.State
  }

/**
 * How a goal in `state` stands: ended, or open and suspended. An open goal with no `Suspended` in
 * force (its runner stopped, or others appended since) reads as suspended with `otherwise`.
 */
export const result = (
  state: State.State,
  otherwise: { readonly reason: Event.SuspendReason; readonly detail: string } = { reason: "shutdown", detail: "the runner stopped" }
): Result => {
  const base = { goalId: state.goalId, iterations: state.completed, state }
  if (state.terminated !== null) return { ...base, status: "terminated", ...state.terminated }
  return { ...base, status: "suspended", ...(state.suspended ?? otherwise) }
}
