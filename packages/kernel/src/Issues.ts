/**
 * Schema decoding errors in words a person or a model can act on: one short clause per problem,
 * joined on one line, e.g. `limit: expected an integer >= 1, got 0; unexpected field "foo"`.
 * The kernel words rejected tool inputs and invalid options this way; adapters and transports
 * can word their own configuration errors the same.
 */
import type { ParseResult } from "effect"
import * as internal from "./internal/issues.js"

/** The problems of a decoding error on one line, joined with "; " (at most ten, then how many more). */
export const format: (error: ParseResult.ParseError | ParseResult.ParseIssue) => string = internal.format

/** The same problems, one per entry. */
export const lines: (error: ParseResult.ParseError | ParseResult.ParseIssue) => ReadonlyArray<string> = internal.lines
