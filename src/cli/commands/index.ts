import type { Command } from '../command.ts';
import { membersAdd, projectsCreate, tenantsCreate } from './tenancy.ts';
import { push } from './push.ts';
import { pull } from './pull.ts';
import { secretsPush } from './secrets.ts';
import { domainsList, domainsVerify } from './domains.ts';
import { CUSTOMER_ROLE_COMMANDS } from './customer-roles.ts';
import { init } from './init.ts';
import { recordsPublish, recordsSave } from './records.ts';
import { apiKeysCreate, apiKeysDelete, apiKeysDisable, apiKeysEnable, apiKeysList } from './api-keys.ts';

/** Every CLI command; each capability adds its own here. */
export const COMMANDS: Command[] = [tenantsCreate, projectsCreate, membersAdd];
COMMANDS.push(apiKeysCreate, apiKeysList, apiKeysDisable, apiKeysEnable, apiKeysDelete);
COMMANDS.push(push, pull, secretsPush, domainsVerify, domainsList, init, ...CUSTOMER_ROLE_COMMANDS);
COMMANDS.push(recordsSave, recordsPublish);
