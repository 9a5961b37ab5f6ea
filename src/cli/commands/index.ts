import type { Command } from '../command.ts';
import { membersAdd, projectsCreate, tenantsCreate } from './tenancy.ts';
import { push } from './push.ts';
import { pull } from './pull.ts';
import { secretsPush } from './secrets.ts';
import { domainsList, domainsVerify } from './domains.ts';
import { CUSTOMER_ROLE_COMMANDS } from './customer-roles.ts';
import { init } from './init.ts';
import { IDENTITY_COMMANDS } from './identity.ts';
import { recordsPublish, recordsSave } from './records.ts';
import { recordsImport } from './records-import.ts';
import { OPERATION_COMMANDS } from './operations.ts';
import { fleetGroupsList, fleetGroupsPublish } from './fleet-groups.ts';
import { busStatus } from './bus.ts';
import { DOCUMENT_COMMANDS } from './documents.ts';
import { audit } from './audit.ts';
import { dataRm } from './data.ts';
import { apiKeysCreate, apiKeysDelete, apiKeysDisable, apiKeysEnable, apiKeysList } from './api-keys.ts';

/** Every CLI command, in the order `svc --help` lists them. */
export const COMMANDS: Command[] = [
  tenantsCreate,
  projectsCreate,
  membersAdd,
  init,
  push,
  pull,
  secretsPush,
  domainsVerify,
  domainsList,
  apiKeysCreate,
  apiKeysList,
  apiKeysDisable,
  apiKeysEnable,
  apiKeysDelete,
  recordsSave,
  recordsPublish,
  recordsImport,
  ...CUSTOMER_ROLE_COMMANDS,
  fleetGroupsPublish,
  fleetGroupsList,
  ...IDENTITY_COMMANDS,
  dataRm,
  ...OPERATION_COMMANDS,
  ...DOCUMENT_COMMANDS,
  busStatus,
  audit,
];
