// npm runs this before the suite (package.json's `pretest`; tap's own `before` hook, with jobs above one, ran it late and
// wiped the coverage of the files already run): Redis and promtool are
// provisioned here, or the run stops in its first seconds with one line saying what to install (test/helpers/provision.ts).
import { spawnSync } from 'node:child_process'
import { installLine, toolFacts, toolPlan } from './helpers/provision.js'

const plan = toolPlan(toolFacts(process.env, process.getuid?.()))
if (plan.action === 'skip') console.error(plan.message)
if (plan.action === 'stop') {
  console.error(plan.message)
  process.exit(1)
}
if (plan.action === 'install') {
  console.error(`Installing ${plan.packages.join(' and ')} for the tests (apt-get, as root)...`)
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' }
  // Everything to stderr: tap reads the tests' stdout, not this script's.
  const run = (args: string[]) => spawnSync('apt-get', args, { stdio: ['ignore', 2, 2], env }).status === 0
  const installed = run(['-qq', 'update']) && run(['-qq', 'install', '-y', ...plan.packages])
  const { missing } = toolFacts(process.env, 0)
  if (!installed || missing.length > 0) {
    console.error(installLine(missing.length > 0 ? missing : plan.packages, 'apt-get could not install them'))
    process.exit(1)
  }
}
