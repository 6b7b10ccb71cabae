/**
 * What the `Goals` service is (`Service`) and what its places share (`observed`): below `Goals`
 * and each place (`local`, `http`, `cluster`), so none of them imports another in a circle.
 */
import { type Event, Goal, type GoalSummary, type Options as RunOptions, type Runner, State } from "@rx/kernel"
import type * as McpFlags from "@rx/mcp/Flags"
import type { Api } from "@rx/server"
import type * as View from "@rx/server/View"
import { Effect, type Option, Stream } from "effect"
import type * as Settings from "../Settings.js"
import type { UsageError } from "../Settings.js"

/** Where the goals are: a log on this machine, or the rx serve at a URL. */
export type Where = { readonly _tag: "Log"; readonly db: Settings.Database } | { readonly _tag: "Server"; readonly url: string }

/** Why a goals operation failed: each says so in one line. */
export type Failure = UsageError | Runner.RunError | Goal.GoalNotFound

/** A resume's start, before its first step: the goal as it stands, what it goes on with, and the settings changes it recorded. */
export interface Starting {
  readonly state: State.State
  readonly settings: Settings.Recorded
  /** The options before this resume recorded its changes, and the `OptionsChanged` it recorded. */
  readonly before: RunOptions.Options
  readonly changed: ReadonlyArray<Event.Of<"OptionsChanged">>
}

/** What a run calls: each committed event, a person's decision where one is at hand, a resume's start. */
export interface Hooks {
  readonly observe: Runner.Observer
  readonly approve?: Runner.Approver | undefined
  readonly starting?: (start: Starting) => Effect.Effect<void>
}

/** A new goal, as the command line gives it. */
export interface RunRequest extends McpFlags.McpFlags {
  /** The goal; with `continues`, the new instruction (default "continue"). */
  readonly goal: Option.Option<string>
  readonly goalFile: Option.Option<string>
  /** An ended goal to continue as a new goal (`rx run --continue`), on this log. */
  readonly continues?: Option.Option<string> | undefined
  readonly given: Settings.Given
}

/** A goal to go on with, and the settings a resume changes. */
export interface ResumeRequest {
  readonly goalId: string
  readonly given: Settings.Given
  readonly mcpEnv: ReadonlyArray<string>
}

/** A decision on the call a goal waits on (or `callId`). */
export interface Decision {
  readonly goalId: string
  readonly approve: boolean
  readonly by: string
  readonly reason: string
  readonly callId: Option.Option<string>
}

/** The call decided on, as it was requested (if the goal still said so). */
export interface Decided {
  readonly callId: string
  readonly call: { readonly tool: string; readonly input: unknown; readonly iteration: number } | null
  /** Why the goal was cancelled, when it was before the decision: the decision is recorded, and the goal runs nothing more. */
  readonly cancelled?: string
}

/**
 * A goal as a listing shows it: a log's summary with whether a live runner holds its lease now
 * (`running`), or a server's view (whose `activity` says so). `GoalSummary.phase` of either says
 * whether an open goal runs, waits, or is idle.
 */
export type Listed = (GoalSummary.GoalSummary & { readonly running: boolean }) | Api.Goal

/** An event of a followed goal, or the note that no runner holds it (said once a time). */
export type Followed = { readonly _tag: "Event"; readonly event: Event.Event } | { readonly _tag: "Unattended" }

export interface Service {
  readonly where: Where
  /** Submit a goal and run it to its end or until it must wait. */
  readonly run: (request: RunRequest, hooks: Hooks) => Effect.Effect<Goal.Result, Failure>
  /** Go on with an open goal. */
  readonly resume: (request: ResumeRequest, hooks: Hooks) => Effect.Effect<Goal.Result, Failure>
  /** Every goal, newest first: the log's summaries, or the server's views of them. */
  readonly list: Effect.Effect<ReadonlyArray<Listed>, Failure>
  /** A goal whole, as `rx inspect` shows it: its log, what it does now, its sub-goals, forks and continuations. */
  readonly view: (goalId: string) => Effect.Effect<View.Goal, Failure>
  /** One goal's summary (or view); a goal that does not exist is an error. */
  readonly summary: (goalId: string) => Effect.Effect<Listed, Failure>
  /** The goals that continue `goalId` (`rx run --continue`), from their own first events. */
  readonly continuedBy: (goalId: string) => Effect.Effect<ReadonlyArray<string>, Failure>
  /** A goal's events as far as they are recorded; a goal that does not exist is an error. */
  readonly events: (goalId: string) => Effect.Effect<ReadonlyArray<Event.Event>, Failure>
  /** A goal's events as they are appended, until it terminates (or, without `wait`, nothing runs it). */
  readonly follow: (goalId: string, wait: boolean) => Stream.Stream<Followed, Failure>
  /** Ask a goal to stop within one step; `reason` is recorded (a server records its own). */
  readonly cancel: (goalId: string, reason: string) => Effect.Effect<"requested" | "already_terminated", Failure>
  /** Record a decision; it runs nothing. */
  readonly decide: (decision: Decision) => Effect.Effect<Decided, Failure>
  /** Send an open goal a message for its next model request (`by` is recorded; a server records its own); an ended goal refuses it. */
  readonly say: (goalId: string, text: string, by: string) => Effect.Effect<void, Failure>
}


/**
 * Follow a goal run elsewhere (by a server, by the workers): its events from the start, each
 * from `from` on observed, until it ends or suspends; then how it stands. `ended` says why, when
 * the events end first.
 */
export const observed = <E, R>(goalId: string, events: Stream.Stream<Event.Event, E, R>, from: number, hooks: Hooks, ended: string) =>
  Effect.gen(function*() {
    let state = State.empty(goalId)
    yield* events.pipe(
      Stream.takeUntil((event) => event._tag === "Terminated" || (event._tag === "Suspended" && event.seq >= from)),
      Stream.runForEach((event) =>
        Effect.suspend(() => {
          state = State.reduce(state, event)
          return event.seq >= from ? hooks.observe(event) : Effect.void
        })
      )
    )
    return Goal.result(state, { reason: "shutdown", detail: ended })
  })

