/**
 * `edit_file {path, old_text, new_text, replace_all?, expected_sha256?, allow_placeholder?}`:
 * replace exact text in an existing file, atomically. `old_text` must occur exactly once, or at
 * least once with `replace_all`. Like any overwrite, the edit needs `expected_sha256` equal to
 * the file's current sha256 (from `read_file`, or the `sha256` of the previous write or edit).
 * Placeholder lines in `new_text` that `old_text` did not have are refused unless
 * `allow_placeholder`; rx's own cut markers always. The deletion an edit makes is explicit, so no
 * shrink rule applies. An edit that would make the file larger than `maxWriteBytes` is refused
 * before the new content is built.
 *
 * After a crash during the call, `recover` removes the call's temp file and records the call as
 * done only when that is certain: the current content is exactly what the edit gives from a
 * content whose sha256 is `expected_sha256`. That pre-image is found by undoing the edit on the
 * current content (each occurrence of `new_text` in turn, or all of them for `replace_all`) and
 * checking its hash; when none matches, or too many candidates exist, the outcome stays unknown.
 */
import { Tool } from "@rx/kernel"
import { Effect, Option, Schema } from "effect"
import { ToolsConfig } from "./Config.js"
import * as Errors from "./internal/errors.js"
import * as Text from "./internal/text.js"
import { checkPlaceholders, checkPrecondition, checkSize, readForRecovery, Sha256, UnsafeWrite } from "./WriteFile.js"
import { FileNotFound, Workspace } from "./Workspace.js"

/** `old_text` does not occur, or occurs more than once without `replace_all`. */
export class NoUniqueMatch extends Schema.TaggedError<NoUniqueMatch>()("@rx/tools/NoUniqueMatch", {
  path: Schema.String,
  occurrences: Schema.Int
}) {
  override get message() {
    return this.occurrences === 0
      ? `old_text does not occur in "${this.path}"; it must match exactly, whitespace and indentation included (read_file shows the current text)`
      : `old_text occurs ${this.occurrences} times in "${this.path}"; include more surrounding lines so it occurs once, or set replace_all: true`
  }
}

export const Input = Schema.Struct({
  path: Schema.String.annotations({ description: "File path, relative to the workspace root." }),
  old_text: Schema.String.pipe(Schema.minLength(1)).annotations({ description: "Exact text to replace." }),
  new_text: Schema.String.annotations({ description: "Text to put in its place." }),
  replace_all: Schema.optional(Schema.Boolean).annotations({ description: "Replace every occurrence. Default false." }),
  expected_sha256: Schema.optional(Sha256),
  allow_placeholder: Schema.optional(Schema.Boolean).annotations({
    description: "Write even though new_text has placeholder lines such as \"... rest of the code unchanged\"."
  })
})
export type Input = typeof Input.Type

export const Output = Schema.Struct({
  path: Schema.String,
  resolved_path: Schema.String,
  /** Occurrences replaced. */
  replacements: Schema.Int,
  /** sha256 of the new content: the `expected_sha256` of the next edit. */
  sha256: Schema.String,
  previous_sha256: Schema.String,
  bytes: Schema.Int
})
export type Output = typeof Output.Type

const occurrences = (text: string, search: string): number => {
  let count = 0
  for (let at = text.indexOf(search); at !== -1; at = text.indexOf(search, at + search.length)) count++
  return count
}

/** The edit applied to `text` (split/join: no `$` patterns, unlike String.replace). */
const apply = (text: string, input: Input): string => text.split(input.old_text).join(input.new_text)

/** Candidate pre-images tried at most when undoing an edit in recovery. */
const maxCandidates = 64

/**
 * The content the edit was applied to, if `current` is certainly its result: a candidate whose
 * sha256 is `expected` and which the edit turns into `current`. `undefined` when none is found.
 */
export const preImage = (current: string, input: Input, expected: string): string | undefined => {
  const accepts = (candidate: string): boolean => {
    if (Text.sha256(Text.utf8(candidate)) !== expected) return false
    const count = occurrences(candidate, input.old_text)
    return count > 0 && (count === 1 || input.replace_all === true) && apply(candidate, input) === current
  }
  if (input.new_text.length === 0) return undefined
  if (input.replace_all === true) {
    const all = current.split(input.new_text).join(input.old_text)
    if (accepts(all)) return all
  }
  let tried = 0
  for (let at = current.indexOf(input.new_text); at !== -1; at = current.indexOf(input.new_text, at + 1)) {
    if (++tried > maxCandidates) return undefined
    const candidate = current.slice(0, at) + input.old_text + current.slice(at + input.new_text.length)
    if (accepts(candidate)) return candidate
  }
  return undefined
}

export const tool = Tool.make({
  name: "edit_file",
  description:
    "Replace exact text in an existing file, atomically. old_text must occur exactly once (or set replace_all). Pass expected_sha256, the file's sha256 from read_file or from the previous write or edit. new_text with placeholder lines (\"... existing code ...\") is refused unless allow_placeholder is true; text copied from a view rx shortened (\"[... N characters omitted ...]\") is always refused.",
  input: Input,
  output: Output,
  idempotent: false,
  execute: (input, context) =>
    Effect.gen(function*() {
      const config = yield* ToolsConfig
      const workspace = yield* Workspace
      let replacements = 0
      let previousSha = ""
      const written = yield* workspace.write(input.path, (current) =>
        Effect.gen(function*() {
          if (Option.isNone(current)) return yield* new FileNotFound({ path: input.path })
          yield* checkPrecondition(input.path, current, input.expected_sha256, "edit")
          if (Text.isBinary(current.value.bytes)) {
            return yield* new UnsafeWrite({ path: input.path, reason: "the file is binary; edit_file changes text files only" })
          }
          if (input.old_text === input.new_text) {
            return yield* new UnsafeWrite({ path: input.path, reason: "old_text and new_text are the same; nothing would change" })
          }
          const text = Text.decodeLenient(current.value.bytes)
          const count = occurrences(text, input.old_text)
          if (count === 0 || (count > 1 && input.replace_all !== true)) {
            return yield* new NoUniqueMatch({ path: input.path, occurrences: count })
          }
          yield* checkPlaceholders(input.path, input.old_text, input.new_text, input.allow_placeholder)
          // The size is known before the content is built (the file is valid UTF-8).
          const growth = Text.utf8(input.new_text).length - Text.utf8(input.old_text).length
          yield* checkSize(input.path, current.value.bytes.length + count * growth, config.maxWriteBytes)
          replacements = count
          previousSha = current.value.sha256
          return Text.utf8(apply(text, input))
        }), { callId: context.callId })
      return {
        path: input.path,
        resolved_path: written.resolved.absolute,
        replacements,
        sha256: written.sha256,
        previous_sha256: previousSha,
        bytes: written.bytes
      }
    }).pipe(
      Effect.catchTags({
        "@rx/tools/UnsafeWrite": (error) => Effect.fail(Errors.recoverable(error)),
        "@rx/tools/NoUniqueMatch": (error) => Effect.fail(Errors.recoverable(error))
      }),
      Effect.mapError(Errors.toToolError)
    ),
  recover: (input, context) =>
    Effect.gen(function*() {
      const config = yield* ToolsConfig
      const workspace = yield* Workspace
      yield* workspace.discardTemp(input.path, context.callId)
      const expected = input.expected_sha256
      // Without expected_sha256 an edit of an existing file is refused: it cannot have taken effect.
      if (expected === undefined) return Option.none()
      const current = yield* readForRecovery(input.path, config.maxWriteBytes)
      if (Option.isNone(current) || Text.isBinary(current.value.bytes)) return Option.none()
      const text = Text.decodeLenient(current.value.bytes)
      const before = preImage(text, input, expected)
      if (before === undefined) return Option.none()
      return Option.some({
        path: input.path,
        resolved_path: current.value.resolved.absolute,
        replacements: occurrences(before, input.old_text),
        sha256: Text.sha256(current.value.bytes),
        previous_sha256: expected,
        bytes: current.value.bytes.length
      })
    }).pipe(Effect.mapError(Errors.toToolError))
})
