/**
 * A tool is a value: a name, a description, Schemas for its input and output, whether it is
 * idempotent, and an `execute` Effect. The kernel never runs side effects itself; it asks the
 * `ToolRegistry` to invoke tools by name.
 */
import { Cause, Effect, Either, JSONSchema, Option, Schema } from "effect"
import * as Issues from "./internal/issues.js"
import { canonical, fingerprint } from "./internal/json.js"

/** How a tool failed. `unknown`: rx stopped while the call ran, so its effect is unknown. */
export const FailureKind = Schema.Literal("recoverable", "fatal", "unknown")
export type FailureKind = typeof FailureKind.Type

/** A tool failure as recorded in the log and shown to the model. */
export const Failure = Schema.Struct({
  kind: FailureKind,
  message: Schema.String,
  details: Schema.optional(Schema.Unknown)
})
export type Failure = typeof Failure.Type

/** Why a goal waits (`Suspended`), and so why a call may wait (`Waiting`). */
export const SuspendReason = Schema.Literal("model_unavailable", "awaiting_approval", "shutdown")
export type SuspendReason = typeof SuspendReason.Type

/** Tokens spent, as a model reports them. */
const Usage = Schema.Struct({ inputTokens: Schema.Number, outputTokens: Schema.Number })

/**
 * What invoking a tool gave: its encoded output, or a failure. Never a thrown error. `observed`
 * is the fingerprint of what a success observes, for tools that say (`make`'s `observation`);
 * `usage`, the tokens the call spent on the goal's behalf (a sub-goal's model calls), which count
 * toward the goal's token budget.
 *
 * `Waiting` (behaviour 4, idempotent tools only): the call cannot end now, because what it runs
 * waits (a sub-goal awaiting a person's approval, or its model): the goal is suspended with the
 * call started (`Suspended`, naming the sub-goal as `child`), and `resume` runs the call again.
 */
export const Outcome = Schema.Union(
  Schema.TaggedStruct("Success", { output: Schema.Unknown, observed: Schema.optional(Schema.String), usage: Schema.optional(Usage) }),
  Schema.TaggedStruct("Failure", { error: Failure }),
  Schema.TaggedStruct("Waiting", { reason: SuspendReason, detail: Schema.String, child: Schema.optional(Schema.String) })
)
export type Outcome = typeof Outcome.Type

/** What a model is told about a tool; recorded in `GoalSubmitted`. */
export const Spec = Schema.Struct({
  name: Schema.String,
  description: Schema.String,
  /** JSON Schema of the input object. */
  parameters: Schema.Record({ key: Schema.String, value: Schema.Unknown }),
  idempotent: Schema.Boolean
})
export type Spec = typeof Spec.Type

/** One call of a tool. `callId` is derived (`goalId:iteration`), so a retried call keeps it. */
export interface Call {
  readonly callId: string
  readonly tool: string
  readonly input: unknown
  /** The goal that makes the call (the runner always says; a call made outside a runner may not). */
  readonly goalId?: string | undefined
}

/** The error a tool's `execute` fails with. Recoverable errors go back to the model. */
export class ToolError extends Schema.TaggedError<ToolError>()("@rx/kernel/ToolError", {
  /** The same vocabulary as a recorded `Failure`: `unknown` is the runner's alone. */
  kind: Schema.Literal("recoverable", "fatal"),
  message: Schema.String,
  details: Schema.optional(Schema.Unknown)
}) {
  /** An error the model can act on (a missing file, a failing command). */
  static recoverable(message: string, details?: unknown): ToolError {
    return new ToolError(details === undefined ? { kind: "recoverable", message } : { kind: "recoverable", message, details })
  }
  /** An error that must end the run (a broken environment, a violated invariant). */
  static fatal(message: string, details?: unknown): ToolError {
    return new ToolError(details === undefined ? { kind: "fatal", message } : { kind: "fatal", message, details })
  }
}

/** Context a tool gets with each call. */
export interface Context {
  readonly callId: string
  /** The goal that makes the call, when a runner makes it. */
  readonly goalId?: string | undefined
}

/**
 * A tool with its types erased, ready for a registry. `R` is what its `execute` needs; the
 * registry's Layer requires it.
 */
export interface Tool<R = never> {
  readonly spec: Spec
  /** Decode a raw input; `Left` is a message the model can act on. */
  readonly decode: (input: unknown) => Either.Either<unknown, string>
  /** Run with an input `decode` accepted; never fails, never dies on tool errors. */
  readonly run: (input: unknown, context: Context) => Effect.Effect<Outcome, never, R>
  /**
   * After rx stopped during a call of this (non-idempotent) tool: its outcome if the tool can
   * tell for certain that the call took effect, `None` if that is unknown. Never fails.
   */
  readonly recover: (input: unknown, context: Context) => Effect.Effect<Option.Option<Outcome>, never, R>
}

/** Any tool, whatever it requires. */
export type Any = Tool<unknown>

/** The services a list of tools requires. */
export type Requirements<T extends ReadonlyArray<Any>> = [T[number]] extends [never] ? never
  : T[number] extends Tool<infer R> ? R
  : never

/** Valid tool names: what OpenAI-compatible servers accept. */
export const namePattern = /^[a-zA-Z0-9_-]{1,64}$/

/** Define a tool. Input and output must encode to JSON: they are recorded in the log. */
export const make = <I, IE, O, OE, R>(definition: {
  readonly name: string
  readonly description: string
  readonly input: Schema.Schema<I, IE>
  readonly output: Schema.Schema<O, OE>
  /** True only if running the call twice has the effect of running it once. */
  readonly idempotent: boolean
  readonly execute: (input: I, context: Context) => Effect.Effect<O, ToolError, R>
  /**
   * Called on resume for a non-idempotent call that was started but has no recorded outcome:
   * `Some(output)` when the call certainly took effect (recorded as its success), `None` when
   * that cannot be known (recorded as outcome `unknown`). It may clean up what the interrupted
   * call left behind. An error counts as `None`.
   */
  readonly recover?: (input: I, context: Context) => Effect.Effect<Option.Option<O>, ToolError, R>
  /**
   * What a result observes of the world, apart from what merely restates the call (its input
   * echoed, durations); `undefined` when this result cannot tell. The same observation
   * `maxRepeats` times in a row ends a run as `no_progress`, whatever the arguments (a loop
   * whose arguments vary but whose results do not). Give it only where an equal observation
   * means nothing changed: a read-only tool, or a result that says the call changed nothing.
   * Without it, a result never counts as the same as another.
   */
  readonly observation?: (input: I, output: O) => unknown
}): Tool<R> => {
  const decodeInput = Schema.decodeUnknownEither(definition.input, { errors: "all", onExcessProperty: "error" })
  const encodeOutput = Schema.encodeEither(definition.output)
  // The JSON Schema of the input, without `$schema` (servers reject or ignore it) and titles.
  const parameters: Record<string, unknown> = Object.fromEntries(
    Object.entries(untitled(JSONSchema.make(definition.input))).filter(([key]) => key !== "$schema")
  )
  const observation = definition.observation
  /** The fingerprint of what a result observes, when the tool says. */
  const observe = (input: I, output: O): string | undefined => {
    if (observation === undefined) return undefined
    const observed = Either.try(() => observation(input, output))
    return Either.isRight(observed) && observed.right !== undefined ? fingerprint(canonical(observed.right)) : undefined
  }
  const succeed = (output: O, input?: I): Outcome =>
    Either.match(encodeOutput(output), {
      onLeft: (error) => failure("fatal", `tool ${definition.name} returned an output its Schema rejects: ${Issues.format(error)}`),
      onRight: (encoded) => {
        const observed = input === undefined ? undefined : observe(input, output)
        return observed === undefined ? { _tag: "Success", output: encoded } : { _tag: "Success", output: encoded, observed }
      }
    })
  const recover = definition.recover
  return {
    spec: { name: definition.name, description: definition.description, parameters, idempotent: definition.idempotent },
    recover: (input, context) =>
      recover === undefined ? Effect.succeed(Option.none()) : recover(input as I, context).pipe(
        Effect.map(Option.map(succeed)),
        Effect.catchAllCause(() => Effect.succeed(Option.none()))
      ),
    decode: (input) =>
      Either.mapLeft(decodeInput(input), Issues.format),
    // One handler for success, errors and defects (one step per call); an interruption goes on.
    run: (input, context) =>
      Effect.matchCauseEffect(definition.execute(input as I, context), {
        onSuccess: (output) => Effect.succeed(succeed(output, input as I)),
        onFailure: (cause) => {
          const error = Cause.failureOption(cause)
          if (Option.isSome(error)) return Effect.succeed(failure(error.value.kind, error.value.message, error.value.details))
          const defect = Cause.dieOption(cause)
          if (Option.isSome(defect)) return Effect.succeed(failure("fatal", `tool ${definition.name} crashed: ${describe(defect.value)}`))
          return Effect.failCause(Cause.stripFailures(cause))
        }
      })
  }
}

/** Keywords whose value maps names to schemas (not to be read as keywords themselves). */
const schemaMaps = new Set(["properties", "patternProperties", "$defs", "definitions", "dependentSchemas"])
/** Keywords whose value is a schema, or an array of schemas. */
const schemaValues = new Set([
  "items", "additionalItems", "prefixItems", "additionalProperties", "propertyNames", "contains", "not", "if", "then", "else",
  "anyOf", "allOf", "oneOf", "unevaluatedItems", "unevaluatedProperties"
])

const isRecord = (value: unknown): value is Record<string, unknown> =>
  value !== null && typeof value === "object" && !Array.isArray(value)

/**
 * A JSON Schema without `title`s: Effect titles every refinement (`"int"`,
 * `"greaterThanOrEqualTo(1)"`), which tells a model nothing its descriptions and constraints do
 * not. Only schema positions are visited, so a property or definition named `title`, and data
 * such as `enum` or `default`, are kept.
 */
const untitled = (schema: object): Record<string, unknown> => {
  const inner = (value: unknown): unknown => (isRecord(value) ? untitled(value) : value)
  const out: Record<string, unknown> = {}
  for (const [key, value] of Object.entries(schema)) {
    if (key === "title" && typeof value === "string") continue
    out[key] = schemaMaps.has(key) && isRecord(value)
      ? Object.fromEntries(Object.entries(value).map(([name, v]) => [name, inner(v)]))
      : schemaValues.has(key)
      ? Array.isArray(value) ? value.map(inner) : inner(value)
      : value
  }
  return out
}

/** A failure outcome. */
export const failure = (kind: FailureKind, message: string, details?: unknown): Outcome => ({
  _tag: "Failure",
  error: details === undefined ? { kind, message } : { kind, message, details }
})

const describe = (defect: unknown): string => defect instanceof Error ? defect.message : String(defect)

/** A pure tool that returns its text: for tests, examples and benchmarks. */
export const echo: Tool = make({
  name: "echo",
  description: "Echo the text back.",
  input: Schema.Struct({ text: Schema.String }),
  output: Schema.Struct({ text: Schema.String }),
  idempotent: true,
  execute: ({ text }) => Effect.succeed({ text })
})
