/* Ends one family's definitions, so that the next family can make its own. */
#undef FAMILY
#undef FAMILY_ID
#undef NS_SIZE
#undef NS_SOURCE
#undef NS_TAG
#undef NS_ERROR
#undef NS_PRIV_OFF
#undef NS_PRIV_LEN
#undef NS_BUF
