/* The version every ofcd program reports. */
#ifndef OFCD_VERSION_H
#define OFCD_VERSION_H

#define OFCD_VERSION "0.1.0"

#endif
