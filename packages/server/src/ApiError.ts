/**
 * The errors of the HTTP API: each is a JSON body `{ "_tag": ..., "message": ..., ... }` with
 * its status. A client tells them apart by `_tag`; `message` is for a person. No error body
 * ever holds a stack trace.
 */
import { HttpApiSchema } from "@effect/platform"
import { Schema } from "effect"

/** The request is malformed: `field` names what is wrong (`goal`, `options.maxIterations`, `body`, `limit`, ...). */
export class BadRequest extends Schema.TaggedError<BadRequest>("BadRequest")(
  "@rx/server/BadRequest",
  { field: Schema.String, message: Schema.String },
  HttpApiSchema.annotations({ status: 400, description: "The request is malformed; `field` names what is wrong" })
) {}

/** No bearer token, or not the server's. */
export class Unauthorized extends Schema.TaggedError<Unauthorized>("Unauthorized")(
  "@rx/server/Unauthorized",
  { message: Schema.String },
  HttpApiSchema.annotations({ status: 401, description: "No bearer token, or not the server's" })
) {}

/** The request came with a Host or Origin this server does not answer (a DNS rebinding attempt, or a web page of another site). */
export class Forbidden extends Schema.TaggedError<Forbidden>("Forbidden")(
  "@rx/server/Forbidden",
  { message: Schema.String },
  HttpApiSchema.annotations({ status: 403, description: "A Host or Origin this server does not answer" })
) {}

/** No such goal (or no such route). */
export class NotFound extends Schema.TaggedError<NotFound>("NotFound")(
  "@rx/server/NotFound",
  { message: Schema.String, goalId: Schema.optional(Schema.String) },
  HttpApiSchema.annotations({ status: 404, description: "No such goal" })
) {}

/** The goal is not in a state that allows this: terminated, run elsewhere, no call waiting for this decision. */
export class Conflict extends Schema.TaggedError<Conflict>("Conflict")(
  "@rx/server/Conflict",
  { message: Schema.String, goalId: Schema.String },
  HttpApiSchema.annotations({ status: 409, description: "The goal's state does not allow this" })
) {}

/** The request body is larger than the server accepts (`limit` bytes). */
export class PayloadTooLarge extends Schema.TaggedError<PayloadTooLarge>("PayloadTooLarge")(
  "@rx/server/PayloadTooLarge",
  { message: Schema.String, limit: Schema.Number },
  HttpApiSchema.annotations({ status: 413, description: "The request body is larger than the server accepts" })
) {}

/** The server cannot take this now: it is starting or shutting down, its queue of goals is full, or too many clients follow events. */
export class Unavailable extends Schema.TaggedError<Unavailable>("Unavailable")(
  "@rx/server/Unavailable",
  { message: Schema.String, reason: Schema.Literal("starting", "shutting_down", "queue_full", "too_many_subscribers", "tools") },
  HttpApiSchema.annotations({ status: 503, description: "Starting or shutting down, or a bound is reached; try again later" })
) {}

/** The server failed (its log could not be read or written); the message says how, never with a stack trace. */
export class InternalError extends Schema.TaggedError<InternalError>("InternalError")(
  "@rx/server/InternalError",
  { message: Schema.String },
  HttpApiSchema.annotations({ status: 500, description: "The server failed" })
) {}

/** Any error body of the API. */
export type ApiError = BadRequest | Unauthorized | Forbidden | NotFound | Conflict | PayloadTooLarge | Unavailable | InternalError
