import { Schema } from "effect"
import { type Event, Options } from "@rx/kernel"

/** A `GoalSubmitted` for `goalId`, as a runner would append it. */
export const submitted = (goalId: string): Event.Event => ({
  _tag: "GoalSubmitted",
  goalId,
  seq: 0,
  iteration: 0,
  at: 1_000,
  goal: "race",
  options: Schema.decodeSync(Options.Options)({}),
  tools: [],
  behaviour: 2
})

/** Exactly one Terminated, and it ends the log. */
export const endsOnce = (events: ReadonlyArray<Event.Event>) =>
  events.filter((e) => e._tag === "Terminated").length === 1 && events[events.length - 1]?._tag === "Terminated"
