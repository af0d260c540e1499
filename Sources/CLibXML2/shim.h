#ifndef LEDGER_CLIBXML2_SHIM_H
#define LEDGER_CLIBXML2_SHIM_H
/* Debian builds libxml2 with ICU, and its headers then include ICU's, which clash with the
 * copy of ICU inside Foundation. Nothing here touches the ICU-dependent structures (only
 * pointers to them pass through), so hide ICU from the headers. */
#include <libxml/xmlversion.h>
#undef LIBXML_ICU_ENABLED
#include <libxml/xmlreader.h>
#include <libxml/xmlerror.h>
#include <libxml/globals.h>

/* libxml2 prints parse errors to stderr by default; the importer reports them itself. */
static void ledger_xml_ignore(void *ctx, const char *msg, ...) { (void)ctx; (void)msg; }
static inline void ledger_xml_silence(void) { xmlSetGenericErrorFunc(NULL, ledger_xml_ignore); }
/* xmlFree is a global function pointer, which Swift 6 treats as shared mutable state. */
static inline void ledger_xml_free(void *pointer) { xmlFree(pointer); }
#endif
