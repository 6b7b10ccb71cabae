/**
 * Decoding configuration: every package that takes a configuration (tools, server, stores,
 * model adapters, cluster) decodes it the same way, so a mistake is reported the same way:
 * every problem at once, an unknown field refused (a misspelt option is an error, not a
 * silently ignored default), all on one line (`Issues.format`), inside the package's own error.
 */
import { Effect, Schema } from "effect"
import * as Issues from "./Issues.js"

/**
 * A decoder of `schema` for configuration input: a failure is `fail(problems)`, where
 * `problems` names each offending field on one line.
 */
export const config = <A, I, E>(
  schema: Schema.Schema<A, I, never>,
  fail: (problems: string) => E
): (input: unknown) => Effect.Effect<A, E> => {
  const decode = Schema.decodeUnknown(schema, { errors: "all", onExcessProperty: "error" })
  return (input) => Effect.mapError(decode(input), (error) => fail(Issues.format(error)))
}

/**
 * A checker of values already of `schema`'s type (a configuration made with its defaults filled
 * in, whose filters and refinements still need checking): a failure is `fail(problems)`.
 */
export const validated = <A, I, E>(
  schema: Schema.Schema<A, I, never>,
  fail: (problems: string) => E
): (value: unknown) => Effect.Effect<A, E> => {
  const validate = Schema.validate(schema, { errors: "all" })
  return (value) => Effect.mapError(validate(value), (error) => fail(Issues.format(error)))
}
