/**
 * Going on past a goal's end: a new goal linked to an ended one (`GoalSubmitted.continues`), with
 * its goal text, and what it did (how it ended, its summary, its newest steps) and the new
 * instruction shown with it. The ended goal's log is only read, never reopened.
 */
import { Effect, Option, Schema } from "effect"
import type * as Event from "./Event.js"
import { GoalNotFound, restore } from "./Goal.js"
import * as Options from "./Options.js"
import * as Prompt from "./Prompt.js"
import * as Runner from "./Runner.js"
import type * as State from "./State.js"
import { first, StateStore, type StoreError } from "./StateStore.js"
import type { ToolRegistry } from "./ToolRegistry.js"

/** The instruction when none is given. */
export const defaultText = "continue"

/** A goal that cannot be continued: it has not ended (resume it instead), or the instruction is too long. */
export class NotContinuable extends Schema.TaggedError<NotContinuable>()("@rx/kernel/NotContinuable", {
  goalId: Schema.String,
  message: Schema.String
}) {}

/** What the goal continuing `ended` records of it, for prompts of `options`' budget. Pure. */
export const of = (ended: State.State, text: string, options: { readonly promptBudget: number }): Event.Continues => ({
  goalId: ended.goalId,
  reason: ended.terminated?.reason ?? "done",
  detail: ended.terminated?.detail ?? "",
  done: Prompt.carried(ended, Prompt.maxGoalChars(options)),
  text
})

/** What a continuation is started with: the ended goal, the new instruction, and the new goal's options (fresh limits). */
export interface Request {
  readonly goalId: string
  readonly text?: string | undefined
  readonly options?: Options.Input
  /** The new goal's id; derived from the goal and the clock unless given. */
  readonly newGoalId?: string
  /** Told of the new goal's `GoalSubmitted` once it is recorded. */
  readonly observe?: Runner.Observer
}

/**
 * Record a new goal continuing the ended goal `goalId` (its goal text and instructions, what it did,
 * `text` as the new instruction) and return its id; `Runner.resume` runs it.
 */
export const submit = (
  request: Request
): Effect.Effect<string, Runner.RunError | GoalNotFound | NotContinuable, ToolRegistry | StateStore> =>
  Effect.gen(function*() {
    const store = yield* StateStore
    if (Option.isNone(yield* store.goal(request.goalId))) return yield* new GoalNotFound({ goalId: request.goalId })
    const ended = yield* restore(request.goalId)
    if (ended.terminated === null) {
      return yield* new NotContinuable({
        goalId: request.goalId,
        message: `goal ${request.goalId} has not ended: rx resume ${request.goalId} goes on with it (rx say ${request.goalId} "..." tells it something)`
      })
    }
    const options = yield* Options.decode(request.options ?? {})
    const text = request.text === undefined || request.text.trim() === "" ? defaultText : request.text
    const limit = Prompt.maxGoalChars(options)
    if (text.length > limit) {
      return yield* new NotContinuable({ goalId: request.goalId, message: `the instruction is ${text.length} characters, more than the ${limit} a prompt shows of it: shorten it` })
    }
    return yield* Runner.submit({
      goal: ended.goal,
      instructions: ended.instructions,
      options: request.options ?? {},
      continues: of(ended, text, options),
      ...(request.newGoalId === undefined ? {} : { goalId: request.newGoalId }),
      ...(request.observe === undefined ? {} : { observe: request.observe })
    })
  })

/**
 * The goals that continue `goalId` (one, usually), from their own `GoalSubmitted`: a continuation
 * keeps its goal's text, so only goals of the same text submitted after it ended are read.
 */
export const continuedBy = (goalId: string): Effect.Effect<ReadonlyArray<string>, StoreError, StateStore> =>
  Effect.gen(function*() {
    const store = yield* StateStore
    const summary = yield* store.goal(goalId)
    if (Option.isNone(summary) || summary.value.status !== "terminated") return []
    const same = (yield* store.goals()).filter((g) => g.goal === summary.value.goal && g.goalId !== goalId && g.submittedAt >= summary.value.updatedAt)
    const found: Array<string> = []
    for (const g of same) {
      const submitted = yield* first(store, g.goalId, 0, ["GoalSubmitted"])
      if (submitted._tag === "GoalSubmitted" && submitted.continues?.goalId === goalId) found.push(g.goalId)
    }
    return found
  })
