/**
 * Goals as the API shows them: the store's summary (which says why an open goal waits: suspended,
 * or a call awaiting a person's decision) and the server's activity; no log is folded to list.
 * Listing pages through the store's order (newest first) with an opaque cursor.
 */
import { Audit, type GoalSummary, type State, StateStore } from "@rx/kernel"
import { Effect, Either, Option, Schema } from "effect"
import type * as Api from "../Api.js"
import { BadRequest, NotFound } from "../ApiError.js"
import * as View from "../View.js"

/** Whether an open goal waits for a person: a call awaits a decision and no cancel came. */
export const waitsForPerson = (state: State.State): boolean =>
  state.terminated === null && state.awaiting !== null && state.awaiting.decision === null && state.cancelRequested === null

/** The view of a goal from its summary, which says why an open goal waits, and the server's activity. */
const view = (summary: GoalSummary.GoalSummary, activity: Api.Activity): Api.Goal => {
  const approval = summary.status === "open" ? summary.approval : null
  return {
    goalId: summary.goalId,
    goal: summary.goal,
    parent: summary.parent,
    forkedFrom: summary.forkedFrom,
    status: summary.status === "terminated" ? "terminated" : approval !== null ? "waiting" : "open",
    activity,
    iterations: summary.iterations,
    nextSeq: summary.nextSeq,
    reason: summary.reason,
    suspended: summary.suspended,
    approval: approval === null ? null : { callId: approval.callId, tool: approval.tool, input: approval.input },
    submittedAt: summary.submittedAt,
    updatedAt: summary.updatedAt
  }
}

/** One goal, with its `Terminated` detail and termination audit; `NotFound` for an unknown id. */
export const one = (goalId: string, activity: (goalId: string) => Api.Activity) =>
  Effect.gen(function*() {
    const store = yield* StateStore.StateStore
    const summary = yield* store.goal(goalId)
    if (Option.isNone(summary)) return yield* new NotFound({ goalId, message: `no goal with id ${goalId}` })
    const goal = view(summary.value, activity(goalId))
    if (summary.value.status !== "terminated") return goal
    const events = yield* store.load(goalId)
    const audit = Audit.of(events)
    const detail = events.findLast((event) => event._tag === "Terminated")
    return {
      ...goal,
      ...(detail?._tag === "Terminated" ? { detail: detail.detail } : {}),
      ...(audit === undefined ? {} : { audit: { ...audit, evidence: audit.evidence.map((e) => e.seq) } })
    }
  })

/** A goal whole (`View.Goal`, as `rx inspect` shows it), with what each goal does now from the server's activity; `NotFound` for an unknown id. */
export const whole = (goalId: string, activity: (goalId: string) => Api.Activity) =>
  Effect.flatMap(
    View.fromStore(goalId, (summary) => Effect.succeed(activity(summary.goalId) !== "idle")),
    Option.match({ onNone: () => Effect.fail(new NotFound({ goalId, message: `no goal with id ${goalId}` })), onSome: Effect.succeed })
  )

/** Where a page ends: the last goal's submission time and id, in the store's order. */
const Cursor = Schema.Tuple(Schema.Number, Schema.String)
const CursorText = Schema.compose(Schema.StringFromBase64Url, Schema.parseJson(Cursor))
const encodeCursor = Schema.encodeSync(CursorText)
const decodeCursor = Schema.decodeUnknownEither(CursorText)

/** Whether `summary` comes after the cursor in the store's order (newest first, then by id, descending). */
const after = ([at, id]: typeof Cursor.Type) => (summary: GoalSummary.GoalSummary) =>
  summary.submittedAt < at || (summary.submittedAt === at && summary.goalId < id)

/** A page of goals with `status` (and of `parent`, or forks of `forkedFrom`, if given), newest first, after `cursor`. */
export const page = (
  params: { readonly status?: Api.GoalStatus | undefined; readonly limit: number; readonly cursor?: string | undefined; readonly parent?: string | undefined; readonly forkedFrom?: string | undefined },
  activity: (goalId: string) => Api.Activity
) =>
  Effect.gen(function*() {
    const store = yield* StateStore.StateStore
    const cursor = params.cursor === undefined ? undefined : decodeCursor(params.cursor)
    if (cursor !== undefined && Either.isLeft(cursor)) {
      return yield* new BadRequest({ field: "cursor", message: "cursor: not a cursor this server gave" })
    }
    const position = cursor === undefined ? undefined : cursor.right
    const stored = yield* store.goals({
      ...(params.status === undefined ? {} : { status: params.status === "terminated" ? "terminated" : "open" }),
      ...(params.parent === undefined ? {} : { parent: params.parent }),
      ...(params.forkedFrom === undefined ? {} : { forkedFrom: params.forkedFrom })
    })
    const candidates = position === undefined ? stored : stored.filter(after(position))
    const goals: Array<Api.Goal> = []
    let more = false
    for (const summary of candidates) {
      const goal = view(summary, activity(summary.goalId))
      if (params.status !== undefined && goal.status !== params.status) continue
      if (goals.length === params.limit) {
        more = true
        break
      }
      goals.push(goal)
    }
    const last = goals[goals.length - 1]
    return { goals, cursor: more && last !== undefined ? encodeCursor([last.submittedAt, last.goalId]) : null } satisfies Api.GoalPage
  })
