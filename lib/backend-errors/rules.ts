import { CodedError } from '../coded-error.js'
import { FILE_LIMITS } from '../defaults.js'
import { ERRORS, FIELD_ERRORS, isErrorName, type ErrorName } from '../errors.js'
import { readFailure } from '../file-error.js'
import { readLimitedText } from '../read-file.js'
import { repeatedKey, REPEATED } from '../json-text.js'

/**
 * The rules file of `--backend-errors` (docs/backend-faults.md, rules): which
 * name a backend's own error answer is given, by its status and, optionally,
 * by values in its JSON body. Compiled once into frozen matchers; a request
 * only walks them.
 */

/** A JSON scalar: what a `match` value may be, compared with `===`. */
type Scalar = string | number | boolean | null

/** A JSONPath of the simple form `$.a.b`, `$['a-b']`, `$.items[0]`, as the keys and indexes to walk. */
export type Path = readonly (string | number)[]

export interface BackendErrorRule {
  /** The statuses the rule applies to, both ends included: one status, or a class such as 400 to 499. */
  readonly from: number
  readonly to: number
  /** Every path must hold exactly its value in the backend's JSON body. */
  readonly match: readonly { readonly path: Path; readonly value: Scalar }[]
  readonly errorName: string
  /** The rule's message, else the table's for a name of the table. */
  readonly message: string
  /** A string of the backend's body to send as the message instead (card numbers masked), when there is one. */
  readonly messageFrom: Path | undefined
}

export interface BackendErrorRules {
  /** In the file's order: the first that matches wins. */
  readonly rules: readonly BackendErrorRule[]
  /** Every name the rules give, with its first rule's message and the statuses (`400`, `4XX`) it is given for: for the OpenAPI document. */
  readonly names: ReadonlyMap<string, { readonly message: string; readonly statuses: readonly string[] }>
}

/** Where the relays read the rules in force: a watched file's latest good ones, or a fixed set. */
export interface BackendErrorSource {
  readonly rules: BackendErrorRules
}

/** No rules: every error answer gets its name from DEFAULT_NAMES. */
export const NO_RULES: BackendErrorRules = Object.freeze({ rules: Object.freeze([]), names: new Map() })

/**
 * The name a backend error answer gets without a matching rule, by status;
 * any other 4xx is `requestIsRefused`, any other 5xx `internalErrorOccurred`
 * (docs/backend-faults.md, names by status).
 */
export const DEFAULT_NAMES: ReadonlyMap<number, ErrorName> = new Map<number, ErrorName>([
  [400, 'requestIsInvalid'],
  [401, 'accessDenied'],
  [403, 'accessDenied'],
  [404, 'resourceIsNotFound'],
  [405, 'methodIsNotAllowed'],
  [408, 'requestTimedOut'],
  [409, 'requestIsInConflict'],
  [413, 'bodyIsTooLarge'],
  [422, 'requestIsNotProcessable'],
  [429, 'requestRateIsTooHigh'],
  [503, 'serviceUnavailable'],
])

export function defaultName(status: number): ErrorName {
  return DEFAULT_NAMES.get(status) ?? (status >= 500 ? 'internalErrorOccurred' : 'requestIsRefused')
}

const RULE_KEYS = new Set(['status', 'match', 'errorName', 'message', 'messageFrom'])
/** Error names in the service's style: lower camel case. */
const NAME = /^[a-z][A-Za-z0-9]*$/
/** A step: a name after a dot, an index, or a single-quoted name with RFC 9535's escapes (2.3.1.1) and no control character. */
const PATH_STEP =
  /^(?:\.([A-Za-z_$][A-Za-z0-9_$]*)|\[(\d+)\]|\['((?:[^'\\\x00-\x1f]|\\(?:[bfnrt/\\']|u[0-9A-Fa-f]{4}))*)'\])/
/** The escapes of a single-quoted name: JSON's, with `\'` for `\"` (RFC 9535 2.3.1.1). */
const ESCAPE = /\\(?:u([0-9A-Fa-f]{4})|(.))/g
const ESCAPED: Readonly<Record<string, string>> = { b: '\b', f: '\f', n: '\n', r: '\r', t: '\t' }

function unescapeName(quoted: string): string {
  return quoted.replace(ESCAPE, (_, hex: string | undefined, char: string) =>
    hex === undefined ? (ESCAPED[char] ?? char) : String.fromCharCode(Number.parseInt(hex, 16)),
  )
}

/** `$.a['b-c'][0]` as ['a', 'b-c', 0], or undefined when it is not of that simple form. */
export function parsePath(text: string): Path | undefined {
  if (!text.startsWith('$')) return undefined
  const path: (string | number)[] = []
  let rest = text.slice(1)
  while (rest !== '') {
    const step = PATH_STEP.exec(rest)
    if (step === null) return undefined
    path.push(step[1] ?? (step[2] === undefined ? unescapeName(step[3] as string) : Number(step[2])))
    rest = rest.slice(step[0].length)
  }
  return path
}

/**
 * The value at `path` in a parsed JSON document; undefined when the path leads nowhere. A name selects a member
 * of an object only, an index an element of an array only (RFC 9535 2.3.1.2, 2.3.3.2): `$.items.length` and
 * `$.a['0']` on arrays, `$.a[0]` on an object, select nothing.
 */
export function valueAt(document: unknown, path: Path): unknown {
  let node = document
  for (const key of path) {
    if (node === null || typeof node !== 'object') return undefined
    if (Array.isArray(node) !== (typeof key === 'number') || !Object.hasOwn(node, key)) return undefined
    node = (node as Record<string | number, unknown>)[key]
  }
  return node
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

function isScalar(value: unknown): value is Scalar {
  return value === null || typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean'
}

function statusRange(status: unknown): [number, number] | undefined {
  if (status === '4xx') return [400, 499]
  if (status === '5xx') return [500, 599]
  return Number.isInteger(status) && (status as number) >= 400 && (status as number) <= 599
    ? [status as number, status as number]
    : undefined
}

function compileRule(rule: unknown, at: string, problems: string[]): BackendErrorRule | undefined {
  if (!isObject(rule)) {
    problems.push(`${at}: must be an object`)
    return undefined
  }
  const before = problems.length
  for (const key of Object.keys(rule))
    if (!RULE_KEYS.has(key))
      problems.push(`${at}.${key}: is not a rule key (status, match, errorName, message, messageFrom)`)
  const range = statusRange(rule.status)
  if (range === undefined) problems.push(`${at}.status: must be a status from 400 to 599, "4xx" or "5xx"`)
  const match: { path: Path; value: Scalar }[] = []
  if (rule.match !== undefined && !isObject(rule.match))
    problems.push(`${at}.match: must be an object of JSONPaths and values`)
  for (const [text, value] of Object.entries(isObject(rule.match) ? rule.match : {})) {
    const path = parsePath(text)
    if (path === undefined)
      problems.push(`${at}.match: "${text}" is not a JSONPath of the form $.a.b, $['a'] or $.a[0]`)
    if (!isScalar(value)) problems.push(`${at}.match["${text}"]: must be a string, number, boolean or null`)
    if (path !== undefined && isScalar(value)) match.push(Object.freeze({ path: Object.freeze(path), value }))
  }
  const { errorName, message, messageFrom } = rule
  if (typeof errorName !== 'string' || !NAME.test(errorName))
    problems.push(`${at}.errorName: must be an error name in lower camel case`)
  else if (Object.hasOwn(FIELD_ERRORS, errorName))
    problems.push(`${at}.errorName: "${errorName}" is a field error name, not an answer's`)
  else if (!isErrorName(errorName) && message === undefined)
    problems.push(`${at}.message: "${errorName}" is not in the error table, so the rule must give its message`)
  if (message !== undefined && (typeof message !== 'string' || message === ''))
    problems.push(`${at}.message: must be a non-empty string`)
  const from = typeof messageFrom === 'string' ? parsePath(messageFrom) : undefined
  if (messageFrom !== undefined && from === undefined)
    problems.push(`${at}.messageFrom: must be a JSONPath of the form $.a.b, $['a'] or $.a[0]`)
  if (problems.length > before) return undefined
  const name = errorName as string
  return Object.freeze({
    from: (range as [number, number])[0],
    to: (range as [number, number])[1],
    match: Object.freeze(match),
    errorName: name,
    message: (message as string | undefined) ?? ERRORS[name as ErrorName].message,
    messageFrom: from && Object.freeze(from),
  })
}

/**
 * Validates a parsed rules file and compiles it, or returns why it is
 * refused, one reason each (`$.rules[0].status: must be ...`).
 */
export function compileBackendErrors(file: unknown): BackendErrorRules | string[] {
  if (!isObject(file) || !Array.isArray(file.rules) || Object.keys(file).some((key) => key !== 'rules')) {
    return ['$: must be an object whose only key is "rules", an array of rules']
  }
  const problems: string[] = []
  const rules: BackendErrorRule[] = []
  file.rules.forEach((rule, i) => {
    const compiled = compileRule(rule, `$.rules[${i}]`, problems)
    if (compiled !== undefined) rules.push(compiled)
  })
  if (problems.length > 0) return problems
  const names = new Map<string, { message: string; statuses: string[] }>()
  for (const rule of rules) {
    const status = rule.from === rule.to ? String(rule.from) : `${rule.from / 100}XX`
    const entry = names.get(rule.errorName) ?? { message: rule.message, statuses: [] }
    if (!entry.statuses.includes(status)) entry.statuses.push(status)
    names.set(rule.errorName, entry)
  }
  return Object.freeze({ rules: Object.freeze(rules), names })
}

/** Reads and compiles a rules file: the rules, or why it is refused. A file that cannot be read throws. */
export async function readBackendErrors(file: string): Promise<BackendErrorRules | string[]> {
  const text = await readLimitedText(file, FILE_LIMITS.backendErrors)
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch (error) {
    return [`not JSON: ${(error as SyntaxError).message}`]
  }
  const repeated = repeatedKey(text)
  if (repeated !== undefined) return [`${repeated}: ${REPEATED}`]
  return compileBackendErrors(parsed)
}

/** Reads and compiles a rules file, or throws EBACKENDERRORS with the file and the reasons. */
export async function loadBackendErrors(file: string): Promise<BackendErrorRules> {
  // A file that cannot be read is said in words, never by its errno code (docs/cli.md).
  const rules = await readBackendErrors(file).catch((error: unknown) => {
    throw new CodedError('EBACKENDERRORS', `${file}: ${readFailure(error)}`)
  })
  if (Array.isArray(rules)) throw new CodedError('EBACKENDERRORS', `${file}: ${rules.join('; ')}`)
  return rules
}
