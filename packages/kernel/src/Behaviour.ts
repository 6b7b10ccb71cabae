/**
 * The kernel's behaviour version: which rules decided a log. `GoalSubmitted` records the
 * version that wrote it, and the runner applies that version's rules for the goal's whole
 * life, so a log is resumed and replayed by the rules it was written under. A rule that would
 * decide differently (another rejection, another termination) is added under a new version;
 * a log of a newer version than this rx knows is refused, never misread.
 */
import { Schema } from "effect"

/** The version this rx writes. 1 is rx 0.1 (logs without the field). */
export const current = 5

/** What a version decides differently. */
export interface Rules {
  /** Answers above `maxAnswerChars` are cut before they are recorded, and rejected. */
  readonly answerCap: boolean
  /** Deepest nesting of a call's arguments accepted; deeper ones are rejected. */
  readonly maxInputDepth: number
  /** Short cycles of calls and results (A, B, A, B, ...) end a run as `no_progress`. */
  readonly cycles: boolean
  /** A started call's long arguments are recorded once, in `ToolStarted`, not again in `ModelResponded`. */
  readonly inputOnce: boolean
  /** Every call of an answer runs, in order (rx 0.1 ran the first and dropped the rest). */
  readonly multiCall: boolean
  /** A model that cannot be reached suspends the goal; only a refused request ends it. */
  readonly suspendWhenUnavailable: boolean
  /** An empty goal, or one longer than a prompt shows of it, is refused at submission (rx 0.1 cut it silently). */
  readonly goalChecked: boolean
  /**
   * The calls of an answer past `maxCallsPerAnswer` are one rejection saying how many were
   * dropped (before: one per call, each with its arguments again); an answer's size counts its
   * call ids and each call's framing too, and an oversized answer keeps a bounded number of
   * calls, so what one iteration records is bounded whatever the model sends.
   */
  readonly boundedAnswer: boolean
  /** An answer a content filter stopped (`finish_reason: content_filter`) is rejected like a cut-off one, never run. */
  readonly withheldRejected: boolean
  /**
   * The same observation `maxRepeats` times in a row ends a run as `no_progress`, whatever the
   * calls' arguments: results of tools that say what their result observes (`Tool.make`'s
   * `observation`) are recorded with its fingerprint (`ToolSucceeded.observed`).
   */
  readonly sameResults: boolean
  /**
   * The repair step (`Repair`) reads what local models send instead of clean tool calls: calls
   * written as text in a model family's form (reasoning set aside), a `functions.` prefix,
   * arguments encoded twice, a JSON action's input under `arguments`; the repairs that made a
   * call are recorded with it. A tool call entry with no function is rejected alone.
   */
  readonly repairs: boolean
  /**
   * Sub-goals: a call of an idempotent tool may wait (`Tool.Outcome` `Waiting`: the goal is
   * suspended with the call started, and a resume runs it again); a call's usage counts toward the
   * token budget (`ToolSucceeded.usage`); a shutdown leaves an idempotent call started for the
   * resume to run again, instead of recording its outcome as unknown; and a call cut short by a
   * cancel is asked to `recover` even when its tool is idempotent (a sub-goal is cancelled with its
   * parent, and its end recorded as the call's outcome).
   */
  readonly subGoals: boolean
  /**
   * A call written as text runs only when it is the answer (`@rx/formats`' decoding 5): reasoning
   * removed, the call ends the text with only end-of-turn tokens after it (prose before it is
   * allowed); a call followed by prose is quoted, one that stands word for word in a tool result
   * is an echo, a `done` beside other prose is never taken, frames must close, and arguments
   * holding special tokens or U+FFFD are refused (native calls too). More families are read.
   */
  readonly answerIsTheCall: boolean
  /**
   * A tree of sub-goals is bounded as a whole: `delegate` refuses a sub-goal past the tree's goals
   * or iterations (`Options.maxTreeGoals`, `maxTreeIterations`), and a waiting sub-goal's
   * suspension names only the sub-goal it waits on, not every level below.
   */
  readonly treeLimits: boolean
  /**
   * Compaction: before the turns about to leave the prompt are dropped, the model is asked for a
   * plain-text summary of them (with the previous one), recorded as `TurnsSummarised` before any
   * prompt shows it; prompts then show the goal, the summary, and the newest turns (`Prompt`).
   * Off for a goal whose options say `compact: false`.
   */
  readonly compaction: boolean
}

const v1: Rules = {
  answerCap: false,
  maxInputDepth: 10_000,
  cycles: false,
  inputOnce: false,
  multiCall: false,
  suspendWhenUnavailable: false,
  goalChecked: false,
  boundedAnswer: false,
  withheldRejected: false,
  sameResults: false,
  repairs: false,
  subGoals: false,
  answerIsTheCall: false,
  treeLimits: false,
  compaction: false
}
const v2: Rules = { ...v1, answerCap: true, maxInputDepth: 64, cycles: true, inputOnce: true, multiCall: true, suspendWhenUnavailable: true, goalChecked: true }
const v3: Rules = { ...v2, boundedAnswer: true, withheldRejected: true, sameResults: true, repairs: true }
const v4: Rules = { ...v3, subGoals: true }
const v5: Rules = { ...v4, answerIsTheCall: true, treeLimits: true, compaction: true }

/** The rules of `version`; versions this rx does not know get today's (callers refuse them first). */
export const rules = (version: number): Rules => (version === 1 ? v1 : version === 2 ? v2 : version === 3 ? v3 : version === 4 ? v4 : v5)

/** A log written by a newer rx than this one. */
export class UnsupportedBehaviour extends Schema.TaggedError<UnsupportedBehaviour>()("@rx/kernel/UnsupportedBehaviour", {
  goalId: Schema.String,
  version: Schema.Number
}) {
  override get message() {
    return `goal ${this.goalId} was written by a newer rx (behaviour version ${this.version}; this rx knows 1 to ${current}): upgrade rx to resume or replay it`
  }
}

/** Whether this rx can run a log of `version`. */
export const isSupported = (version: number): boolean => Number.isInteger(version) && version >= 1 && version <= current
