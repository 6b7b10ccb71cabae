/**
 * The limits and thresholds of a run. Every field has a default; the decoded options are
 * recorded in `GoalSubmitted`, so a resumed or replayed run uses exactly the same ones.
 */
import { Effect, Schema } from "effect"
import { compile, copier } from "./internal/guard.js"
import * as Issues from "./internal/issues.js"
import { Settings } from "./Settings.js"

const count = (fallback: number) =>
  Schema.optionalWith(Schema.Int.pipe(Schema.positive()), { default: () => fallback })

export const Options = Schema.Struct({
  /** Iterations a run may take; enforced before the model is asked. */
  maxIterations: count(50),
  /** Consecutive failed tool calls that end a run as `repeated_failure`. */
  maxConsecutiveFailures: count(3),
  /** Consecutive rejected model answers that end a run as `malformed_output`. */
  maxMalformed: count(3),
  /** The same call with the same result this many times in a row ends a run as `no_progress`. */
  maxRepeats: count(3),
  /** Iterations in a row with no successful tool call that end a run as `no_progress`. */
  noProgressWindow: count(8),
  /** Characters of conversation text a prompt may hold; older tool output is compacted to fit. */
  promptBudget: Schema.optionalWith(Schema.Int.pipe(Schema.greaterThanOrEqualTo(2_000)), { default: () => 32_000 }),
  /**
   * Whether turns leaving the prompt are first summarised by the model (behaviour 5 on); absent
   * means yes. `false` shows only the newest turns and counts the rest.
   */
  compact: Schema.optional(Schema.Boolean),
  /** Characters a model answer may hold (text and call arguments); a longer one is cut and rejected. */
  maxAnswerChars: count(1_000_000),
  /** Input plus output tokens the run may spend, as the model reports them; unlimited when absent. */
  maxTotalTokens: Schema.optional(Schema.Int.pipe(Schema.positive())),
  /** Calls of one answer that run, in order; later ones are rejected as `too_many_calls`. */
  maxCallsPerAnswer: count(8),
  /**
   * Per tool: `auto` runs its calls, `ask` waits for a person to approve each one (the goal is
   * suspended until then), `deny` never runs them and tells the model. Tools not named: `auto`.
   */
  approval: Schema.optionalWith(Schema.Record({ key: Schema.String, value: Schema.Literal("auto", "ask", "deny") }), {
    default: () => ({})
  }),
  /**
   * How deep a tree of sub-goals may grow below the goal at its root (depth 0): a sub-goal at this
   * depth may not delegate further. Read by the `delegate` tool (default 2); a sub-goal inherits it.
   */
  maxDepth: Schema.optional(Schema.Int.pipe(Schema.nonNegative())),
  /** Sub-goals one goal may delegate, read by the `delegate` tool (default 8); a sub-goal inherits it. */
  maxChildren: Schema.optional(Schema.Int.pipe(Schema.nonNegative())),
  /** Goals a tree may hold, its root included, read by the `delegate` tool (default 100); a sub-goal inherits it. */
  maxTreeGoals: Schema.optional(Schema.Int.pipe(Schema.positive())),
  /** Iterations the goals of a tree may take together, read by the `delegate` tool (default 1,000); a sub-goal inherits it. */
  maxTreeIterations: Schema.optional(Schema.Int.pipe(Schema.positive())),
  /** The settings the transport runs the goal with (workspace, sandbox, model): `Settings`. */
  settings: Schema.optional(Settings),
  /** Free-form data of the caller's, recorded for audit; rx reads none of it. */
  metadata: Schema.optionalWith(Schema.Record({ key: Schema.String, value: Schema.Unknown }), { default: () => ({}) })
})
export type Options = typeof Options.Type
/** What a caller may pass (some fields or none; the rest defaulted). */
export type Input = typeof Options.Encoded

/** Options that do not decode: the message names each offending field, on one line. */
export class InvalidOptions extends Schema.TaggedError<InvalidOptions>()("@rx/kernel/InvalidOptions", {
  message: Schema.String
}) {}

const decodeOptions = Schema.decodeUnknown(Options, { errors: "all", onExcessProperty: "error" })

/** The defaults. */
export const defaults: Options = Schema.decodeSync(Options)({})

const typeAst = Schema.typeSchema(Options).ast
/**
 * Accepts exactly the complete options a decoding returns, excess properties refused. No field
 * transforms its value (only absent ones take defaults), so input that passes it with the
 * defaults filled in is what decoding would return, once copied as decoding copies it.
 */
const isOptions = compile(typeAst)
const copy = copier(typeAst)

/**
 * The input with the defaults filled in, when that is valid options: what decoding returns
 * (which costs about 40 kB of garbage), without decoding; `undefined` otherwise.
 */
const filled = (input: unknown): Options | undefined => {
  if (isOptions === undefined || copy === undefined || typeof input !== "object" || input === null || Array.isArray(input)) return undefined
  const merged = { ...defaults, ...input }
  return isOptions(merged) ? (copy(merged) as Options) : undefined
}

/** Decode caller input into complete options. */
export const decode = (input: unknown): Effect.Effect<Options, InvalidOptions> => {
  const options = filled(input)
  return options !== undefined ? Effect.succeed(options) : decodeOptions(input).pipe(
    Effect.mapError((error) =>
      new InvalidOptions({ message: `invalid run options: ${Issues.format(error)}` })
    )
  )
}
