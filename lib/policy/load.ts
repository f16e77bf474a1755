import { readdir } from 'node:fs/promises'
import { basename, join } from 'node:path'
import { FILE_LIMITS } from '../defaults.js'
import { readFailure } from '../file-error.js'
import { readLimitedText } from '../read-file.js'
import { compilePolicy, type Policy } from './policy.js'
import { repeatedKey, REPEATED } from '../json-text.js'

export interface PolicyProblem {
  readonly file: string
  readonly reason: string
  /** The refused text, which tells a new version of the file from one already refused; absent when it could not be read. */
  readonly text?: string
}

export const POLICY_SUFFIX = '.json'

/** The entity a policy file is for: its name without `.json`. */
export function entityOfFile(file: string): string {
  return basename(file, POLICY_SUFFIX)
}

/** Reads and validates one policy file: the policy, or why it is refused. */
export async function loadPolicyFile(path: string): Promise<Policy | PolicyProblem> {
  let text: string
  try {
    text = await readLimitedText(path, FILE_LIMITS.policy)
  } catch (error) {
    return { file: path, reason: readFailure(error) }
  }
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch (error) {
    return { file: path, reason: `not JSON: ${(error as SyntaxError).message}`, text }
  }
  const repeated = repeatedKey(text)
  if (repeated !== undefined) return { file: path, reason: `${repeated}: ${REPEATED}`, text }
  const policy = compilePolicy(parsed)
  if (Array.isArray(policy)) return { file: path, reason: policy.join('; '), text }
  const expected = entityOfFile(path)
  if (policy.entity !== expected) {
    return { file: path, reason: `$.entity: must be "${expected}", the file's name`, text }
  }
  return policy
}

export interface LoadedPolicies {
  readonly policies: Map<string, Policy>
  readonly problems: PolicyProblem[]
}

/** Every `*.json` file of a folder. A folder that cannot be read throws: there is nothing to serve. */
export async function loadPolicyDir(dir: string): Promise<LoadedPolicies> {
  const names = (await readdir(dir)).filter((name) => name.endsWith(POLICY_SUFFIX)).sort()
  const policies = new Map<string, Policy>()
  const problems: PolicyProblem[] = []
  for (const name of names) {
    const loaded = await loadPolicyFile(join(dir, name))
    if ('reason' in loaded) problems.push(loaded)
    else policies.set(loaded.entity, loaded)
  }
  return { policies, problems }
}
