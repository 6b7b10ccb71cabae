/**
 * The HTTP API of rx, as one @effect/platform `HttpApi` definition: the server implements it,
 * `/openapi.json` is generated from it, and a client (`HttpApiClient.make(Api)`) can be derived
 * from it. Every body is a Schema; every error is a typed body of `ApiError` with its status.
 *
 * - `health`: `GET /healthz`, the only route without the bearer token.
 * - `goals`: submit, list, read, follow (events), cancel, decide on an approval, resume.
 * - `docs`: `GET /openapi.json`.
 * - `ui`: the web inspector's page and files (no token; not in the OpenAPI document).
 */
import { HttpApi, HttpApiEndpoint, HttpApiGroup, HttpApiMiddleware, HttpApiSchema, HttpApiSecurity, OpenApi } from "@effect/platform"
import { Event, Options } from "@rx/kernel"
import { Schema } from "effect"
import * as ApiError from "./ApiError.js"
import * as View from "./View.js"

/** The run options a client may set: every kernel option but `settings` and `metadata`, which the server records itself. */
export const RunOptions = Options.Options.omit("settings", "metadata").annotations({ identifier: "RunOptions" })

/** `POST /v1/goals`. */
export const SubmitRequest = Schema.Struct({
  /** What to achieve. */
  goal: Schema.String,
  options: Schema.optional(RunOptions),
  /** Standing instructions shown to the model with the goal. */
  instructions: Schema.optional(Schema.String),
  /** A folder relative to the server's workspace root (default: the root itself); it may not leave the root. */
  workspace: Schema.optional(Schema.String),
  /**
   * A goal that ended, to continue as this new goal: it takes that goal's text, what it did (how it
   * ended, its summary, its last steps), and `goal` as the new instruction. A goal that has not
   * ended is refused (409): resume it.
   */
  continues: Schema.optional(Schema.String)
}).annotations({ identifier: "SubmitRequest" })
export type SubmitRequest = typeof SubmitRequest.Type

/**
 * `Idempotency-Key` (1 to 255 visible ASCII characters, such as a UUID): a retry with the same key
 * and the same body answers the goal the first attempt recorded, even after a restart; the same
 * key with another body is a 409.
 */
export const SubmitHeaders = Schema.Struct({
  "idempotency-key": Schema.optional(Schema.String.annotations({
    description: "Makes a retried submission safe: the same key and body answer the goal recorded first, never a second goal"
  }))
})

/** A goal recorded (its `GoalSubmitted` is durable) and queued to run. */
export const Submitted = Schema.Struct({ goalId: Schema.String }).annotations({ identifier: "Submitted" })
export type Submitted = typeof Submitted.Type

/**
 * `terminated`: the goal ended (its one `Terminated`). `waiting`: open, and a call waits for a
 * person's decision. `open`: any other open goal (running, queued, or suspended until resumed).
 */
export const GoalStatus = Schema.Literal("open", "waiting", "terminated").annotations({ identifier: "GoalStatus" })
export type GoalStatus = typeof GoalStatus.Type

/** What this server does with the goal now: runs it, has it queued, or neither. */
export const Activity = Schema.Literal("running", "queued", "idle").annotations({ identifier: "Activity" })
export type Activity = typeof Activity.Type

/** A call waiting for a person's decision, exactly as it will run if approved. */
export const PendingApproval = Schema.Struct({
  callId: Schema.String,
  tool: Schema.String,
  input: Schema.Unknown
}).annotations({ identifier: "PendingApproval" })

/** Why a terminated goal ended (`Audit.of` of the kernel): the rule or limit, and the seqs of the events that led there. */
export const TerminationAudit = Schema.Struct({
  reason: Event.Reason,
  /** The `Terminated` event's seq and time (epoch milliseconds). */
  seq: Schema.NonNegativeInt,
  at: Schema.Number,
  detail: Schema.String,
  /** The rule or limit involved, with its value (`maxIterations = 50`). */
  limit: Schema.String,
  /** The seqs of the events that led there, oldest first. */
  evidence: Schema.Array(Schema.NonNegativeInt)
}).annotations({ identifier: "TerminationAudit" })

/** A goal as the API shows it: its summary, status, why it ended or waits, and any pending approval. */
export const Goal = Schema.Struct({
  goalId: Schema.String,
  goal: Schema.String,
  /** For a sub-goal (delegated by a goal's `delegate` call): the goal that delegated it; null otherwise. `GET /v1/goals?parent=` lists a goal's sub-goals. */
  parent: Schema.NullOr(Schema.String),
  /** For a fork (`rx fork`): the goal and step it was forked from; null otherwise. `GET /v1/goals?forkedFrom=` lists a goal's forks. */
  forkedFrom: Schema.NullOr(Event.ForkedFrom),
  status: GoalStatus,
  activity: Activity,
  /** Iterations completed. */
  iterations: Schema.NonNegativeInt,
  /** The seq the next event will take. */
  nextSeq: Schema.NonNegativeInt,
  /** Why the goal ended; null while it is open. */
  reason: Schema.NullOr(Event.Reason),
  /** The `Terminated` event's detail (on `GET /v1/goals/{id}` only). */
  detail: Schema.optional(Schema.String),
  /** The termination audit of a terminated goal (on `GET /v1/goals/{id}` only). */
  audit: Schema.optional(TerminationAudit),
  /** Why the last runner stopped without ending the goal, until it moves on; `child`: the sub-goal whose wait it waits on. */
  suspended: Schema.NullOr(Schema.Struct({ reason: Event.SuspendReason, detail: Schema.String, child: Schema.optional(Schema.String) })),
  approval: Schema.NullOr(PendingApproval),
  /** Epoch milliseconds. */
  submittedAt: Schema.Number,
  updatedAt: Schema.Number
}).annotations({ identifier: "Goal" })
export type Goal = typeof Goal.Type

/** A page of goals, newest first; `cursor` fetches the next page (null on the last). */
export const GoalPage = Schema.Struct({
  goals: Schema.Array(Goal),
  cursor: Schema.NullOr(Schema.String)
}).annotations({ identifier: "GoalPage" })
export type GoalPage = typeof GoalPage.Type

/** A seq in a query parameter or header. */
const seq = (description: string) => Schema.NumberFromString.pipe(Schema.int(), Schema.nonNegative()).annotations({ description })

/** `GET /v1/goals?status=&limit=&cursor=`. */
export const ListParams = Schema.Struct({
  status: Schema.optional(GoalStatus),
  limit: Schema.optionalWith(
    Schema.NumberFromString.pipe(Schema.int(), Schema.between(1, 500)).annotations({ description: "Goals per page, 1 to 500 (default 50)" }),
    { default: () => 50 }
  ),
  cursor: Schema.optional(Schema.String.annotations({ description: "The `cursor` of the previous page" })),
  parent: Schema.optional(Schema.String.annotations({ description: "Only the sub-goals of this goal (those its delegate calls made)" })),
  forkedFrom: Schema.optional(Schema.String.annotations({ description: "Only the forks of this goal (rx fork)" }))
})

/** `POST /v1/goals/{id}/approvals/{callId}`: run the call exactly as requested, or deny it (the model is told `reason`). */
export const Decision = Schema.Struct({
  approve: Schema.Boolean,
  reason: Schema.optional(Schema.String),
  /**
   * Who decides, as the person gave their name (the inspector asks once per tab): recorded as
   * `<name> (via <the server's approver>)`, a claim made with the token. Without it, the approver.
   */
  by: Schema.optional(
    Schema.Trim.pipe(
      Schema.nonEmptyString({ message: () => "by: a name, or leave it out" }),
      Schema.maxLength(80, { message: () => "by: at most 80 characters" }),
      Schema.pattern(/^[^\u0000-\u001f\u007f-\u009f\u200e\u200f\u202a-\u202e\u2066-\u2069]*$/, { message: () => "by: no control or direction characters" })
    )
  )
}).annotations({ identifier: "Decision" })
export type Decision = typeof Decision.Type

/**
 * `?from=<seq>`: the events after that seq, as `Last-Event-ID` does (which wins when both are
 * given). `?follow=false`: only the events recorded when the request came, then the response ends.
 */
export const EventsParams = Schema.Struct({
  from: Schema.optional(seq("The last seq the client has: the events after it follow (as with Last-Event-ID)")),
  follow: Schema.optionalWith(
    Schema.BooleanFromString.annotations({ description: "false: the events recorded so far, then the response ends (default true: until Terminated)" }),
    { default: () => true }
  )
})

/** `Accept: text/event-stream` asks for Server-Sent Events; `Last-Event-ID` resumes after that seq. */
export const EventsHeaders = Schema.Struct({
  accept: Schema.optional(Schema.String.annotations({ description: "text/event-stream for Server-Sent Events; JSON lines otherwise" })),
  "last-event-id": Schema.optional(seq("The last seq the client has: the events after it follow"))
})

/** A goal's events: one JSON line each (`Event.encodeJson`, as `rx events` prints), or Server-Sent Events. */
export const EventLines = HttpApiSchema.Text({ contentType: "application/x-ndjson" }).annotations({
  description:
    "The goal's events, each one JSON line as `rx events` prints it, until its Terminated. With `Accept: text/event-stream`, Server-Sent Events whose `id` is the event's seq."
})

export const Health = Schema.Struct({ status: Schema.Literal("ok") }).annotations({ identifier: "Health" })

/** The bearer token of every route but `/healthz`. */
export class Authorization extends HttpApiMiddleware.Tag<Authorization>()("@rx/server/Authorization", {
  failure: ApiError.Unauthorized,
  security: { bearer: HttpApiSecurity.bearer }
}) {}

/**
 * A message to a running goal: the model is shown it at its next request, once, as the user's. A
 * suspended goal gets it when resumed; an ended one refuses it (409: continue it as a new goal).
 * With `Idempotency-Key`, a retry of the same message appends nothing.
 */
export const Message = Schema.Struct({
  text: Schema.String.pipe(Schema.nonEmptyString({ message: () => "text: the message, not empty" }), Schema.maxLength(8_000, { message: () => "text: at most 8000 characters" })),
  /** Who sends it: recorded as `<name> (via <the server's approver>)`, like a decision's `by`. */
  by: Decision.fields.by
}).annotations({ identifier: "Message" })
export type Message = typeof Message.Type

const goalId = HttpApiSchema.param("id", Schema.String)
const callId = HttpApiSchema.param("callId", Schema.String)

export class HealthGroup extends HttpApiGroup.make("health").add(
  HttpApiEndpoint.get("health", "/healthz").addSuccess(Health)
) {}

export class GoalsGroup extends HttpApiGroup.make("goals")
  .add(HttpApiEndpoint.post("submit", "/v1/goals").setPayload(SubmitRequest).setHeaders(SubmitHeaders).addSuccess(Submitted, { status: 202 }))
  .add(HttpApiEndpoint.get("list", "/v1/goals").setUrlParams(ListParams).addSuccess(GoalPage))
  .add(HttpApiEndpoint.get("get")`/v1/goals/${goalId}`.addSuccess(Goal))
  .add(HttpApiEndpoint.get("view")`/v1/goals/${goalId}/view`.addSuccess(View.Goal))
  .add(
    HttpApiEndpoint.get("events")`/v1/goals/${goalId}/events`
      .setUrlParams(EventsParams)
      .setHeaders(EventsHeaders)
      .addSuccess(EventLines)
  )
  .add(HttpApiEndpoint.post("cancel")`/v1/goals/${goalId}/cancel`.addSuccess(Goal, { status: 202 }))
  .add(
    HttpApiEndpoint.post("decide")`/v1/goals/${goalId}/approvals/${callId}`.setPayload(Decision).addSuccess(Goal, { status: 202 })
  )
  .add(HttpApiEndpoint.post("resume")`/v1/goals/${goalId}/resume`.addSuccess(Goal, { status: 202 }))
  .add(HttpApiEndpoint.post("say")`/v1/goals/${goalId}/messages`.setPayload(Message).setHeaders(SubmitHeaders).addSuccess(Goal, { status: 202 }))
  .addError(ApiError.Conflict)
  .middleware(Authorization)
{}

/** A page of the web inspector. */
const Page = HttpApiSchema.Text({ contentType: "text/html" }).annotations({ description: "A file of the web inspector" })

/**
 * The web inspector: the page at `/` and its script and stylesheet under `/ui/`. They hold no
 * secret, so they need no token (the page asks for it, and sends it only in a header).
 */
export class UiGroup extends HttpApiGroup.make("ui")
  .add(HttpApiEndpoint.get("page", "/").addSuccess(Page))
  .add(HttpApiEndpoint.get("asset")`/ui/${HttpApiSchema.param("file", Schema.String)}`.addSuccess(Page))
  .annotate(OpenApi.Exclude, true)
{}

export class DocsGroup extends HttpApiGroup.make("docs")
  .add(
    HttpApiEndpoint.get("openapi", "/openapi.json").addSuccess(
      Schema.Unknown.annotations({ description: "The OpenAPI document of this API" })
    )
  )
  .middleware(Authorization)
{}

/** The whole API. */
export class Api extends HttpApi.make("rx")
  .add(HealthGroup)
  .add(UiGroup)
  .add(GoalsGroup)
  .add(DocsGroup)
  .addError(ApiError.BadRequest)
  .addError(ApiError.Forbidden)
  .addError(ApiError.NotFound)
  .addError(ApiError.PayloadTooLarge)
  .addError(ApiError.Unavailable)
  .addError(ApiError.InternalError)
  .annotate(OpenApi.Title, "rx")
  .annotate(OpenApi.Version, "1")
  .annotate(OpenApi.Description, "Submit, follow, cancel and approve goals of the rx agent kernel.")
{}

/** The OpenAPI document of `Api`. */
export const openApi = (): OpenApi.OpenAPISpec => OpenApi.fromApi(Api)
